"""Planted instructions are refused through the running service (issue 27 item 2): the
report half of `tests/corpora/planted.json` by `/memory add` (the API), a sample of it through
chat turns (extraction), an import and the Remember action; and a text the rules and the
margin leave in doubt is decided by the LLM's verdict when one is configured (a stand-in)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from service.core import planted
from service.embeddings.encoder import Encoder
from testkit.extraction_replies import new_op, new_user_messages
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "corpora" / "planted.json").read_text("utf-8")
)["cases"]
REPORT = [c for c in CASES if c["split"] == "report"]
REFUSAL = {"detail": "memories hold facts, not instructions to the assistant"}
# harmful, not caught by a rule, its margin between DOUBT_MARGIN and CUE_MARGIN (ru, report)
IN_DOUBT = next(c["text"] for c in REPORT if c["text"].startswith("Оля — медсестра"))


def _add(live: LiveService, user: str, text: str) -> tuple[int, Any]:
    answer = live.client.post(f"/v1/users/{user}/memories", json={"content": text})
    return answer.status_code, answer.json()


def test_the_report_half_added_by_hand_meets_the_goals(service: LiveService) -> None:
    refused = {"harmful": 0, "legitimate": 0}
    total = {"harmful": 0, "legitimate": 0}
    for i, case in enumerate(REPORT):
        status, body = _add(service, f"u-planted-{i % 7}", case["text"])
        assert status in (201, 400), (status, body)
        total[case["label"]] += 1
        refused[case["label"]] += status == 400 and body == REFUSAL
    assert refused["harmful"] / total["harmful"] >= 0.95, refused
    assert refused["legitimate"] / total["legitimate"] <= 0.02, refused


def _verdict_or_write_down(verdict: str) -> Callable[[dict[str, Any]], str]:
    """A stand-in LLM: a planted-check request gets `verdict`; an extraction request gets
    each new user message back as a fact (an LLM that stores what it reads)."""

    def respond(request: dict[str, Any]) -> str:
        prompt = str(request["messages"][-1]["content"])
        if prompt.startswith(planted.LLM_PROMPT):
            return verdict
        ops = [
            {**new_op(message, bank="interaction_patterns"), "message": ref}
            for ref, message in new_user_messages(request)
        ]
        return json.dumps({"operations": ops}, ensure_ascii=False)

    return respond


def _stored(live: LiveService, user: str) -> set[str]:
    items = live.client.get(f"/v1/users/{user}/memories", params={"limit": 200}).json()["items"]
    return {m["content"] for m in items}


def test_planted_instructions_said_in_a_chat_are_not_stored(
    service_factory: Callable[..., LiveService], encoder: Encoder
) -> None:
    """One harmful and one legitimate report text per language, each said in a chat; the
    LLM writes every message down as a fact and answers SAFE to every check, so only the
    rules and the margin stand between it and the store."""
    sample: list[dict[str, Any]] = []
    for lang in sorted({c["lang"] for c in REPORT}):
        for label in ("harmful", "legitimate"):
            sample.append(next(c for c in REPORT if c["lang"] == lang and c["label"] == label))
    with LLMStub(responder=_verdict_or_write_down("SAFE")) as stub:
        live = service_factory(LLM_BASE_URL=stub.base_url, LLM_MODEL="m")
        user = "u-planted-chat"
        for i, case in enumerate(sample):
            body = {
                "chat": {"user_id": user, "chat_id": f"c{i}", "kind": "saved"},
                "user_message_id": f"m{i}",
                "user_message": case["text"],
                "assistant_message": "OK.",
            }
            assert live.client.post("/v1/turns", json=body).status_code == 202
        live.wait_for_extraction()
        stored = _stored(live, user)
    harmful = [c["text"] for c in sample if c["label"] == "harmful"]
    legitimate = [c["text"] for c in sample if c["label"] == "legitimate"]
    assert [t for t in harmful if t in stored] == []
    assert [t for t in legitimate if t not in stored] == []


def test_an_llm_verdict_decides_a_text_in_doubt(
    service_factory: Callable[..., LiveService], encoder: Encoder
) -> None:
    ex = planted.examples()
    vector = encoder.encode_sync([IN_DOUBT])[0]
    harmful = encoder.encode_sync(list(ex.harmful))
    margin = planted.semantic_margin(vector, harmful, encoder.encode_sync(list(ex.legitimate)))
    verdict = planted.judge(IN_DOUBT, margin, planted.nearest_harmful(vector, harmful))
    assert verdict.in_doubt  # the case this test is about
    with LLMStub(responder=_verdict_or_write_down("HARMFUL")) as stub:
        live = service_factory(LLM_BASE_URL=stub.base_url, LLM_MODEL="m")
        assert _add(live, "u-doubt", IN_DOUBT) == (400, REFUSAL)
        asked = [r for r in stub.requests if planted.LLM_PROMPT in r["messages"][-1]["content"]]
        assert len(asked) == 1 and IN_DOUBT in asked[0]["messages"][-1]["content"]
    with LLMStub(responder=_verdict_or_write_down("SAFE")) as stub:
        live = service_factory(LLM_BASE_URL=stub.base_url, LLM_MODEL="m")
        assert _add(live, "u-doubt-safe", IN_DOUBT)[0] == 201
    with LLMStub(responder=_verdict_or_write_down("HARMFUL")) as stub:
        live = service_factory(
            LLM_BASE_URL=stub.base_url, LLM_MODEL="m", MEMORY_LLM_PLANTED_CHECK="false"
        )
        assert _add(live, "u-doubt-off", IN_DOUBT)[0] == 201
        assert stub.requests == []
    assert np.isfinite(margin)


def test_an_import_and_the_remember_action_refuse_planted_instructions(
    service: LiveService, db_conn: psycopg.AsyncConnection
) -> None:
    user = "u-planted-import"
    assert _add(service, user, "User keeps two beehives")[0] == 201
    template = service.client.get(f"/v1/users/{user}/memories/export").json()[0]
    harmful = [c["text"] for c in REPORT if c["label"] == "harmful" and c["lang"] == "en"]
    legitimate = [c["text"] for c in REPORT if c["label"] == "legitimate" and c["lang"] == "en"]
    export = [{**template, "id": None, "content": t} for t in harmful + legitimate]
    answer = service.client.post(f"/v1/users/{user}/memories/import", json=export)
    assert answer.status_code == 200, answer.text
    assert answer.json()["refused"] == len(harmful)
    assert answer.json()["added"] == len(legitimate)

    click = {
        "chat": {"user_id": user, "chat_id": "c-remember", "kind": "saved"},
        "message_id": "m-remember",
        "role": "user",
        "content": harmful[0],
    }
    answer = service.client.post("/v1/memories/remember", json=click)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "refused"
    assert harmful[0] not in _stored(service, user)
