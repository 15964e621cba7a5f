"""One set of limits (service/core/limits.py), enforced for every writer of memories."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from service.core import limits
from testkit.extraction_replies import new_op
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

CHAT = {"user_id": "u1", "chat_id": "chat-1", "kind": "saved"}


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub() as stub:
        yield stub


@pytest.fixture
def extracting(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model", LLM_API_KEY="x")


def _contents(service: LiveService) -> list[str]:
    rows = service.client.get("/v1/users/u1/memories/export").json()
    return [m["content"] for m in rows]


def test_extraction_drops_facts_over_the_limit_and_operations_past_the_cap_and_logs_them(
    extracting: LiveService, llm: LLMStub, caplog: pytest.LogCaptureFixture
) -> None:
    long_fact = "User wrote " + "a very long fact " * 200  # 3,411 characters
    many = [new_op(f"User owns a model railway locomotive number {i}") for i in range(45)]

    def answer(_: dict[str, Any]) -> str:
        return json.dumps({"operations": [new_op(long_fact), *many]})

    llm.responder = answer
    turn = {"chat": CHAT, "user_message_id": "m1", "user_message": "Here are my locomotives"}
    with caplog.at_level(logging.INFO):
        assert extracting.client.post("/v1/turns", json=turn).status_code == 202
        assert extracting.wait_for_extraction()["turns_failed"] == 0
    stored = _contents(extracting)
    assert len(stored) == limits.MAX_OPERATIONS == 30
    assert long_fact not in stored
    assert max(len(s) for s in stored) <= limits.MAX_FACT_CHARS
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert any("1 operations over 2000 characters" in m for m in dropped), dropped
    assert any("15 operations past the cap of 30" in m for m in dropped), dropped


def test_a_fact_too_long_for_the_api_is_too_long_for_a_command(service: LiveService) -> None:
    fact = "User " + "likes trains " * 157  # 2,046 characters: a command may hold it
    api = service.client.post("/v1/users/u1/memories", json={"content": fact})
    assert api.status_code == 422
    command = service.client.post(
        "/v1/commands", json={"chat": CHAT, "command": f"/memory add {fact}"}
    )
    assert command.status_code == 200, command.text
    assert command.json()["text"] == (
        "That didn't work: a memory holds at most 2000 characters; this one has 2045."
    )
    assert _contents(service) == []


def test_a_command_longer_than_the_limit_is_answered_with_a_sentence(service: LiveService) -> None:
    command = "/memory search " + "trains " * 2_000
    answer = service.client.post("/v1/commands", json={"chat": CHAT, "command": command})
    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == (
        "That didn't work: a command holds at most 2100 characters; this one has 14015."
    )


def test_tags_are_limited_in_length_and_number_for_every_writer(service: LiveService) -> None:
    long_tag = service.client.post(
        "/v1/users/u1/memories", json={"content": "User likes tea", "tags": ["t" * 33]}
    )
    assert long_tag.status_code == 422, long_tag.text
    too_many = service.client.post(
        "/v1/users/u1/memories",
        json={"content": "User likes tea", "tags": [f"t{i}" for i in range(11)]},
    )
    assert too_many.status_code == 422
    fine = service.client.post(
        "/v1/users/u1/memories", json={"content": "User likes tea", "tags": ["t" * 32]}
    )
    assert fine.status_code == 201, fine.text
    assert _contents(service) == ["User likes tea"]
