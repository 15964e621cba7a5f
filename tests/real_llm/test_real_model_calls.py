"""Each kind of LLM call of the product against a real model (llama.cpp, a registry model).

The model is small and its answers are not scripted, so these tests assert the product's
invariants, not particular facts: whatever the model answers, the result is valid memories
or none — nothing from the assistant's reply, no secret, nothing that is a copy of a prompt
placeholder, no crash, no turn left waiting. Each test is a few calls (CI runs them on the
135M model; `MEMORY_TESTS_REAL_LLM_MODEL=qwen2.5-1.5b` runs them on the 1.5B one).

Every request reaches the model through a recording proxy (`testkit.local_llm.Forwarder`), so
a test also checks what was sent: no secret ever leaves the service.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from service.cli.main import app as cli
from service.core import limits
from service.core.profile import PROMPT as PROFILE_PROMPT
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.local_llm import Forwarder, LocalLLMServer
from testkit.waiting import wait_until

#: A password the user types: it must reach neither the model nor a memory.
SECRET = "Qx7#pLm2-vR9!tZw"
#: A fact only the assistant states: it must never become a memory about the user.
ASSISTANT_ONLY = "Ulaanbaatar"
#: Texts that show a prompt's placeholder or schema was copied instead of a fact.
PLACEHOLDER = re.compile(r"NEW\|UPDATE|<fact>|<memory>|\.\.\.$|^\s*$|\{\{|\}\}", re.IGNORECASE)
BANKS = {"personal", "interaction_patterns", "project", "chat", "assistant"}
CHAT = {"user_id": "ana", "user_name": "Ana", "chat_id": "real-chat", "kind": "saved"}
#: Seconds the tests wait for background work of a slow model on a busy 2-core machine.
SLOW_S = 480.0
#: One attempt per turn (a failed turn must end failed, visibly, not wait for retries) and
#: short answers: the 135M model often runs on to max_tokens, 1,500 tokens took it 173 s
#: under load; 300 are plenty for the few facts of these turns.
ONE_TRY = {
    "LLM_TIMEOUT_S": str(SLOW_S),
    "LLM_MAX_ANSWER_TOKENS": "300",
    "MEMORY_EXTRACTION_ATTEMPTS": "1",
    "MEMORY_EXTRACTION_RETRY_BASE_S": "1",
}

pytestmark = pytest.mark.timeout(int(SLOW_S * 2))
PROFILE_PROMPT_START = PROFILE_PROMPT[:40]


@pytest.fixture
def proxy(
    real_llm: LocalLLMServer, request: pytest.FixtureRequest
) -> Iterator[tuple[LLMStub, Forwarder]]:
    """The recording proxy; with MEMORY_TESTS_REAL_LLM_LOG set, each call is appended there as a
    JSON line (test, seconds, tokens, the model's answer) for the docs' figures."""
    forwarder = Forwarder(real_llm)
    with LLMStub(responder=forwarder) as stub:
        yield stub, forwarder
    log = os.environ.get("MEMORY_TESTS_REAL_LLM_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as out:
            for exchange in forwarder.exchanges:
                record = {
                    "test": request.node.name,
                    "model": real_llm.key,
                    "seconds": round(exchange.seconds, 2),
                    "usage": exchange.usage,
                    "answer": exchange.answer[:2000],
                }
                out.write(json.dumps(record, ensure_ascii=False) + "\n")


@pytest.fixture
def live(service_factory, proxy: tuple[LLMStub, Forwarder]) -> LiveService:  # type: ignore[no-untyped-def]
    stub, _ = proxy
    return service_factory(  # type: ignore[no-any-return]
        LLM_BASE_URL=stub.base_url, LLM_MODEL="real", **ONE_TRY
    )


def _memories(live: LiveService, user: str = "ana") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = live.client.get(f"/v1/users/{user}/memories").json()["items"]
    return items


def _assert_valid(items: list[dict[str, Any]]) -> None:
    """Valid memories or none: each a non-empty, bounded sentence in a known bank, with no
    secret, no assistant-only fact and no copied placeholder."""
    for item in items:
        content = item["content"]
        assert content.strip(), item
        assert len(content) <= limits.MAX_FACT_CHARS, item
        assert item["bank"] in BANKS, item
        assert SECRET not in content, item
        assert ASSISTANT_ONLY.lower() not in content.lower(), item
        assert not PLACEHOLDER.search(content), item


def _assert_nothing_secret_sent(forwarder: Forwarder) -> None:
    assert forwarder.exchanges, "the model was never called"
    for exchange in forwarder.exchanges:
        assert SECRET not in str(exchange.request["messages"])


def _turn(live: LiveService, msg_id: str, user: str, assistant: str) -> None:
    body = {
        "chat": CHAT,
        "user_message_id": msg_id,
        "user_message": user,
        "assistant_message": assistant,
    }
    response = live.client.post("/v1/turns", json=body)
    assert response.status_code == 202, response.text


def _not_stuck(live: LiveService) -> dict[str, Any]:
    status = live.wait_for_extraction(timeout_s=SLOW_S)
    assert status["turns_queued"] == 0
    return status


def test_extraction_writes_valid_memories_or_none(
    live: LiveService, proxy: tuple[LLMStub, Forwarder]
) -> None:
    _, forwarder = proxy
    _turn(
        live,
        "m1",
        f"I just adopted a greyhound called Pixel, and my wifi password is {SECRET}.",
        f"Congratulations! By the way, the capital of Mongolia is {ASSISTANT_ONLY}.",
    )
    _turn(live, "m2", "I started a new job as a nurse at the city hospital.", "Good luck!")
    status = _not_stuck(live)
    assert status["turns_done"] + status["turns_failed"] == 2
    _assert_valid(_memories(live))
    _assert_nothing_secret_sent(forwarder)


def test_a_broken_first_answer_gets_a_repair_call_to_the_model(
    live: LiveService, proxy: tuple[LLMStub, Forwarder]
) -> None:
    _, forwarder = proxy
    calls: list[int] = []

    def cut_the_first(_request: dict[str, Any], answer: str) -> str:
        calls.append(1)
        return '{"operations": [{"op": "NEW", "content": "User' if len(calls) == 1 else answer

    forwarder.tamper = cut_the_first
    _turn(live, "m1", "My daughter Lina plays the violin.", "Lovely!")
    _not_stuck(live)
    assert len(forwarder.exchanges) >= 2, "no repair call followed the truncated answer"
    repair = forwarder.exchanges[1].request["messages"]
    assert repair[-2]["role"] == "assistant" and repair[-2]["content"].startswith('{"operations"')
    _assert_valid(_memories(live))


def _jobs_idle(database_url: str) -> bool:
    """No job running and none due (a batch waiting for its quiet period is not due)."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing' OR "
            "(status = 'todo' AND (scheduled_at IS NULL OR scheduled_at <= now()))"
        ).fetchone()
    return row is not None and row[0] == 0


def test_profile_is_written_from_memories_or_left_out(
    live: LiveService, proxy: tuple[LLMStub, Forwarder], database_url: str
) -> None:
    _, forwarder = proxy
    for fact in [
        "User is vegetarian",
        "User lives in Porto",
        "User works as a nurse",
        "User has a greyhound named Pixel",
        "User is learning the violin",
        "User prefers short answers",
    ]:
        assert live.client.post("/v1/users/ana/memories", json={"content": fact}).status_code == 201

    def profile_asked_and_done() -> bool:
        asked = any(PROFILE_PROMPT_START in str(e.request) for e in forwarder.exchanges)
        return asked and _jobs_idle(database_url)

    wait_until(profile_asked_and_done, what="a profile call and its job done", timeout_s=SLOW_S)
    context = live.client.post("/v1/context", json={"chat": CHAT, "message": "hello"}).json()
    profile = context.get("profile") or ""
    assert SECRET not in profile and ASSISTANT_ONLY not in profile
    assert not PLACEHOLDER.search(profile) or not profile
    assert context["block"].count("<userMemories>") <= 1


def test_chat_summary_of_a_long_chat_is_valid_or_absent(
    service_factory,
    proxy: tuple[LLMStub, Forwarder],
    database_url: str,  # type: ignore[no-untyped-def]
) -> None:
    stub, forwarder = proxy

    def nothing_to_extract(request: dict[str, Any]) -> str | None:
        # extraction answers "nothing" at once, so that the turns are done and the summary
        # call (the kind under test) is the one the model answers
        last = str((request.get("messages") or [{}])[-1].get("content"))
        return None if "<chat_summary>" in last else '{"operations": []}'

    forwarder.local = nothing_to_extract
    live = service_factory(
        LLM_BASE_URL=stub.base_url,
        LLM_MODEL="real",
        MEMORY_BATCH_MESSAGES="2",
        MEMORY_BATCH_QUIET_S="3600",
        MEMORY_CHAT_SUMMARY_TOKENS="40",
        **ONE_TRY,
    )
    lines = [
        "We are planning a trip to Peru in June.",
        "We land in Lima on June 3 and take the train to Cusco.",
        "The hotel in Cusco is booked for four nights.",
        f"The booking site password is {SECRET}.",
    ]
    for i, line in enumerate(lines):
        _turn(live, f"m{i}", line, "Noted.")
    _not_stuck(live)
    wait_until(lambda: _jobs_idle(database_url), what="the summary job", timeout_s=SLOW_S)
    assert forwarder.exchanges, "no summary call reached the model"
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT content FROM memories WHERE source_kind = 'chat_summary'"
        ).fetchall()
    for (summary,) in rows:
        assert SECRET not in summary and not PLACEHOLDER.search(summary), summary
        assert len(summary) <= limits.MAX_FACT_CHARS, summary
    _assert_nothing_secret_sent(forwarder)


def test_consolidation_keeps_every_fact_or_changes_nothing(
    live: LiveService, proxy: tuple[LLMStub, Forwarder], database_url: str
) -> None:
    stub, _ = proxy
    seed = [
        "User's dog is named Biscuit",
        "Biscuit is a border collie",
        "User's dog Biscuit is a border collie",
        "User drinks an oat-milk flat white every morning",
        "Every morning the user has a flat white with oat milk",
        "User lives in Valencia",
    ]
    for fact in seed:
        assert live.client.post("/v1/users/ana/memories", json={"content": fact}).status_code == 201
    env = {
        "DATABASE_URL": database_url,
        "LLM_BASE_URL": stub.base_url,
        "LLM_MODEL": "real",
        "HF_HUB_OFFLINE": "1",
        **ONE_TRY,
    }
    result = CliRunner().invoke(cli, ["summarize", "--user", "ana"], env=env)
    assert result.exit_code == 0, result.output
    after = _memories(live)
    _assert_valid(after)
    text = " ".join(m["content"] for m in after).lower()
    # a summary may merge, never lose: each distinct fact is still said somewhere
    for word in ("biscuit", "flat white", "valencia"):
        assert word in text, (word, after)


def test_remember_click_stores_valid_memories_or_none(
    live: LiveService, proxy: tuple[LLMStub, Forwarder]
) -> None:
    _, forwarder = proxy
    response = live.client.post(
        "/v1/memories/remember",
        json={
            "chat": CHAT,
            "message_id": "m9",
            "role": "user",
            "content": f"I'm allergic to penicillin. My bank PIN password is {SECRET}.",
            "author_id": "ana",
        },
        timeout=SLOW_S,  # the click waits for the model
    )
    assert response.status_code == 200, response.text
    done = response.json()
    # a secret inside the text: the click stores the rest with the secret taken out, or
    # refuses; it never errs or leaves the click running
    assert done["status"] in {"stored", "refused", "nothing", "duplicate"}, done
    assert done["text"].strip() and SECRET not in done["text"]
    stored = {m["content"] for m in done["memories"]}
    assert stored <= {m["content"] for m in _memories(live)}
    _assert_valid(_memories(live))
    for exchange in forwarder.exchanges:
        assert SECRET not in str(exchange.request["messages"])


def test_import_of_pasted_text_previews_valid_memories_only(
    live: LiveService, proxy: tuple[LLMStub, Forwarder]
) -> None:
    _, forwarder = proxy
    pasted = (
        "/memory import\nI grow tomatoes on my balcony and I run 10 km every Sunday.\n"
        f"My email password is {SECRET}."
    )
    answer = live.client.post(
        "/v1/commands", json={"chat": CHAT, "command": pasted}, timeout=SLOW_S
    )
    assert answer.status_code == 200, answer.text
    text = answer.json()["text"]
    assert SECRET not in text and ASSISTANT_ONLY not in text
    found = re.search(r"/memory import confirm ([0-9a-f]{6})", text)
    if found:
        confirm = live.client.post(
            "/v1/commands",
            json={"chat": CHAT, "command": f"/memory import confirm {found.group(1)}"},
            timeout=SLOW_S,
        )
        assert confirm.status_code == 200, confirm.text
    _assert_valid(_memories(live))
    for exchange in forwarder.exchanges:
        assert SECRET not in str(exchange.request["messages"])
