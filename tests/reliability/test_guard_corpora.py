"""The two guards on their whole corpora, through the running service: every secret format
and every planted instruction goes in by chat and by `/memory add`; the look-alikes and the
genuine preferences must come out unchanged. Figures: "secrets caught / look-alikes kept"
and "instructions refused / preferences kept" (bench/reliability_summary.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.core import person
from testkit import secret_search
from testkit.extraction_replies import new_op, new_user_messages
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from tests.reliability.support import record_figures

CORPORA = Path(__file__).parents[1] / "corpora"
SECRETS: dict[str, Any] = json.loads((CORPORA / "secrets.json").read_text())
# corpus v2 (issue 27): issuers' formats, written by tests/corpora/make_secrets_v2.py
SECRETS_V2: dict[str, Any] = json.loads((CORPORA / "secrets_v2.json").read_text())
GOAL_CAUGHT, GOAL_DAMAGED = 0.97, 0.02
INSTRUCTIONS: dict[str, Any] = json.loads((CORPORA / "instructions.json").read_text())
_EARLIER_USER = re.compile(r"^user: (.*)$", re.MULTILINE)
# Text columns only: the digits of an embedding would match a short PIN.
TEXTS = {
    "turns": "payload::text",
    "memories": "content",
    "memory_events": "coalesce(before::text, '') || coalesce(after::text, '')",
    "procrastinate_jobs": "args::text",
}


def _write_down(request: dict[str, Any]) -> str:
    """An LLM that stores what it reads: each new message as a fact, and an earlier user
    message joined with the new one (how an order split over two messages comes back)."""
    prompt = str(request["messages"][-1]["content"])
    earlier = prompt.split("EARLIER MESSAGES (context only):", 1)[-1].split("NEW USER", 1)[0]
    before = _EARLIER_USER.findall(earlier)
    ops = []
    for ref, message in new_user_messages(request):
        ops.append({**new_op(message, bank="interaction_patterns"), "message": ref})
        if before:
            joined = f"{before[-1]} {message}"
            ops.append({**new_op(joined, bank="interaction_patterns"), "message": ref})
    return json.dumps({"operations": ops}, ensure_ascii=False)


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(responder=_write_down) as stub:
        yield stub


def _chat(user: str) -> dict[str, Any]:
    return {"user_id": user, "chat_id": f"chat-{user}", "kind": "saved"}


def _turn(
    user: str, message: str, msg_id: str, history: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"chat": _chat(user), "user_message_id": msg_id, "user_message": message}
    if history:
        body["history"] = history
    return body


def _post_turn(live: LiveService, body: dict[str, Any]) -> None:
    assert live.client.post("/v1/turns", json=body).status_code == 202


def _add(live: LiveService, user: str, text: str) -> str:
    answer = live.client.post(
        "/v1/commands", json={"chat": _chat(user), "command": f"/memory add {text}"}
    )
    assert answer.status_code == 200
    return str(answer.json()["text"])


def _contents(live: LiveService, user: str) -> list[str]:
    items = live.client.get(f"/v1/users/{user}/memories?limit=200").json()["items"]
    return [m["content"] for m in items]


def _unchanged(live: LiveService, user: str, text: str) -> bool:
    """The user's memories are `text` as written (the chat turn) and as `/memory add` stores
    it (third person), nothing else."""
    stored = set(_contents(live, user))
    return bool(stored) and stored <= {text, person.third_person(text)}


async def _found_anywhere(db_conn: psycopg.AsyncConnection, value: str) -> bool:
    for table, text in TEXTS.items():
        row = await (
            await db_conn.execute(
                f"SELECT count(*) FROM {table} WHERE {text} ~ %s",
                (secret_search.sql_pattern(value),),
            )
        ).fetchone()
        if row and row[0]:
            return True
    return False


async def test_every_secret_of_the_corpus_is_caught_and_every_lookalike_kept(
    live: LiveService, llm: LLMStub, db_conn: psycopg.AsyncConnection
) -> None:
    cases = SECRETS["secrets"]
    lookalikes = SECRETS["lookalikes"]
    # one user per text: nothing is taken for a duplicate of another case
    for i, case in enumerate(cases):
        _post_turn(live, _turn(f"sec-{i}", case["text"], f"s{i}"))
        _add(live, f"sec-{i}", f"note {case['text']}")
    for i, text in enumerate(lookalikes):
        _post_turn(live, _turn(f"look-{i}", text, f"l{i}"))
        _add(live, f"look-{i}", text)
    status = live.wait_for_extraction(timeout_s=600)
    assert status["turns_done"] == len(cases) + len(lookalikes)
    sent = json.dumps(llm.requests, ensure_ascii=False)
    leaked = []
    for case in cases:
        for value in case["hide"]:
            if secret_search.holds(sent, value) or await _found_anywhere(db_conn, value):
                leaked.append(case["text"])
                break
    # by chat and by hand: a second copy may be taken for a duplicate, never changed (beyond
    # `/memory add` putting a first-person text in the third person, core/person.py)
    damaged = [t for i, t in enumerate(lookalikes) if not _unchanged(live, f"look-{i}", t)]
    record_figures(
        "guard_secrets",
        {
            "secrets": len(cases),
            "secrets_caught": len(cases) - len(leaked),
            "lookalikes": len(lookalikes),
            "lookalikes_kept": len(lookalikes) - len(damaged),
            "paths": ["chat turn (ledger, LLM, extraction, audit)", "/memory add"],
        },
    )
    assert (leaked, damaged) == ([], [])


def _bounded(value: str) -> str:
    """A POSIX regular expression (PostgreSQL `~`) for `value` not inside a longer run of
    letters and digits: a three-digit CVV must not be "found" in a timestamp."""
    escaped = "".join(c if c.isalnum() else f"\\{c}" for c in value)
    return f"(^|[^0-9A-Za-z]){escaped}([^0-9A-Za-z]|$)"


async def _found_as_value(db_conn: psycopg.AsyncConnection, sent: str, value: str) -> bool:
    if re.search(rf"(?<![0-9A-Za-z]){re.escape(value)}(?![0-9A-Za-z])", sent):
        return True
    for table, text in TEXTS.items():
        row = await (
            await db_conn.execute(
                f"SELECT count(*) FROM {table} WHERE {text} ~ %s", (_bounded(value),)
            )
        ).fetchone()
        if row and row[0]:
            return True
    return False


@pytest.mark.timeout(1200)
async def test_the_report_half_of_corpus_v2_meets_the_goals_through_the_service(
    live: LiveService, llm: LLMStub, db_conn: psycopg.AsyncConnection
) -> None:
    """The half the rules were not tuned on, by chat (a split secret as two turns of one
    chat, the second with the first in its history) and by `/memory add`: at least 97 % of
    the secrets nowhere (ledger, memories, audit, jobs, LLM requests), at most 2 % of the
    look-alikes changed."""
    cases = [c for c in SECRETS_V2["secrets"] if c["split"] == "report"]
    lookalikes = [c["text"] for c in SECRETS_V2["lookalikes"] if c["split"] == "report"]
    turns = 0
    for i, case in enumerate(cases):
        user = f"v2-sec-{i}"
        history: list[dict[str, str]] = []
        for j, part in enumerate(case.get("parts") or [case["text"]]):
            _post_turn(live, _turn(user, part, f"v{i}-{j}", history))
            history = [{"role": "user", "content": part}, {"role": "assistant", "content": "OK."}]
            turns += 1
        if "parts" not in case:
            _add(live, user, f"note {case['text']}")
    for i, text in enumerate(lookalikes):
        _post_turn(live, _turn(f"v2-look-{i}", text, f"w{i}"))
        _add(live, f"v2-look-{i}", text)
    status = live.wait_for_extraction(timeout_s=900)
    assert status["turns_done"] == turns + len(lookalikes)
    sent = json.dumps(llm.requests, ensure_ascii=False)
    leaked = []
    for case in cases:
        for value in case["hide"]:
            if await _found_as_value(db_conn, sent, value):
                leaked.append(case["text"])
                break
    damaged = [t for i, t in enumerate(lookalikes) if not _unchanged(live, f"v2-look-{i}", t)]
    caught = 1 - len(leaked) / len(cases)
    changed = len(damaged) / len(lookalikes)
    record_figures(
        "guard_secrets_v2_report",
        {
            "secrets": len(cases),
            "kinds": len({c["kind"] for c in cases}),
            "secrets_caught": len(cases) - len(leaked),
            "lookalikes": len(lookalikes),
            "lookalikes_kept": len(lookalikes) - len(damaged),
            "paths": ["chat turn (ledger, LLM, extraction, audit)", "/memory add"],
            "missed": leaked,
            "changed": damaged,
        },
    )
    assert caught >= GOAL_CAUGHT, leaked
    assert changed <= GOAL_DAMAGED, damaged


def test_every_planted_instruction_is_refused_and_every_preference_kept(
    live: LiveService, llm: LLMStub
) -> None:
    planted = INSTRUCTIONS["planted"]
    preferences = INSTRUCTIONS["preferences"]
    added_refusals = 0
    for i, entry in enumerate(planted):
        user = f"plant-{i}"
        parts = entry.get("parts") or [entry["text"]]
        history: list[dict[str, str]] = []
        for j, part in enumerate(parts):
            _post_turn(live, _turn(user, part, f"p{i}-{j}", history))
            history = [{"role": "user", "content": part}, {"role": "assistant", "content": "OK."}]
            answer = _add(live, user, part)
            added_refusals += "not instructions to the assistant" in answer
    for i, text in enumerate(preferences):
        _post_turn(live, _turn(f"pref-{i}", text, f"q{i}"))
        _add(live, f"pref-{i}", text)
    total_turns = sum(len(e.get("parts") or [1]) for e in planted) + len(preferences)
    assert live.wait_for_extraction(timeout_s=600)["turns_done"] == total_turns
    stored_planted = [e for i, e in enumerate(planted) if _contents(live, f"plant-{i}")]
    lost = [t for i, t in enumerate(preferences) if not _unchanged(live, f"pref-{i}", t)]
    record_figures(
        "guard_instructions",
        {
            "planted": len(planted),
            "split_over_two_messages": sum("parts" in e for e in planted),
            "instructions_refused": len(planted) - len(stored_planted),
            "preferences": len(preferences),
            "preferences_kept": len(preferences) - len(lost),
            "refused_by_memory_add": added_refusals,
        },
    )
    assert (stored_planted, lost) == ([], [])
