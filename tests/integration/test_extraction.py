"""Extraction through the LLM stand-in: validation, repair, dedup, updates, idempotency."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from testkit.extraction_replies import by_message, new_op
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

CHAT = {"user_id": "u1", "user_name": "Noor", "chat_id": "chat-1", "kind": "saved"}


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub() as stub:
        yield stub


@pytest.fixture
def extracting(service_factory: Callable[..., LiveService], llm: LLMStub) -> LiveService:
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model", LLM_API_KEY="x")


def _turn(
    message: str, msg_id: str, chat: dict[str, Any] | None = None, **extra: object
) -> dict[str, Any]:
    return {
        "chat": chat or CHAT,
        "user_message_id": msg_id,
        "user_message": message,
        "assistant_message": "Noted.",
        **extra,
    }


def _active(service: LiveService, user: str = "u1") -> list[str]:
    items = service.client.get(f"/v1/users/{user}/memories").json()["items"]
    return sorted(m["content"] for m in items)


def test_json_mode_object_yields_every_fact_of_a_multi_fact_message(
    extracting: LiveService, llm: LLMStub
) -> None:
    """Case 6: the answer is one top-level object, so JSON mode keeps both facts."""
    message = "My sister Noor is a marine biologist, and I play the cello in a community orchestra."
    llm.responder = by_message(
        {
            "sister Noor": [
                new_op("User's sister Noor is a marine biologist", tags=["relationship"]),
                new_op("User plays the cello in a community orchestra", tags=["behavior"]),
            ]
        }
    )
    assert extracting.client.post("/v1/turns", json=_turn(message, "m1")).status_code == 202
    extracting.wait_for_extraction()
    assert _active(extracting) == [
        "User plays the cello in a community orchestra",
        "User's sister Noor is a marine biologist",
    ]
    sent = llm.requests[-1]
    # asked with the answer's schema (service/llm/structured.py), which the stand-in accepts
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["schema"]["required"] == ["operations"]
    assert "<new_user_message>" + message + "</new_user_message>" in sent["messages"][-1]["content"]


@pytest.mark.parametrize(
    "wrapped",
    [
        "<think>the user said they work nights…</think>{payload}",
        "Sure! Here you go:\n```json\n{payload}\n```\nAnything else?",
    ],
)
def test_reasoning_blocks_and_code_fences_are_stripped(
    service_factory: Callable[..., LiveService],
    wrapped: str,
) -> None:
    """Case 7 (a), (b)."""
    payload = json.dumps(
        {
            "operations": [
                new_op("User is a night-shift nurse"),
                new_op("User prefers short answers", bank="interaction_patterns"),
            ]
        }
    )
    with LLMStub(responder=lambda _: wrapped.replace("{payload}", payload)) as stub:
        live = service_factory(LLM_BASE_URL=stub.base_url, LLM_MODEL="m")
        live.client.post(
            "/v1/turns", json=_turn("I'm a night-shift nurse and I prefer short answers.", "m1")
        )
        status = live.wait_for_extraction()
    assert status["turns_done"] == 1
    assert _active(live) == ["User is a night-shift nurse", "User prefers short answers"]


@pytest.mark.parametrize(
    "bad_answer",
    [
        '{"operations":[{"op":"ADD","text":"User works nights',
        "I cannot answer in JSON, sorry.",
    ],
)
async def test_truncated_or_missing_json_is_retried_once_then_fails_without_partial_write(
    service_factory: Callable[..., LiveService],
    db_conn: psycopg.AsyncConnection,
    bad_answer: str,
) -> None:
    """Case 7 (c): one repair retry, then the turn fails visibly and nothing is written."""
    with LLMStub(responder=lambda _: bad_answer) as stub:
        live = service_factory(LLM_BASE_URL=stub.base_url, LLM_MODEL="m")
        live.client.post("/v1/turns", json=_turn("I'm a night-shift nurse; I work nights.", "m1"))
        status = live.wait_for_extraction()
        sent = list(stub.requests)
    assert (status["turns_failed"], status["turns_done"], len(sent)) == (1, 0, 2)
    assert sent[1]["messages"][-1]["content"].startswith("Your previous answer was not a valid")
    assert status["status"] == "up to date; 1 turn failed"
    assert _active(live) == []
    row = await (await db_conn.execute("SELECT status, payload ? 'texts' FROM turns")).fetchall()
    assert row == [("failed", True)], "a failed turn keeps its text so it can be retried"


def test_failed_turns_reach_admins_in_the_next_turns_admin_notice(
    service_factory: Callable[..., LiveService],
) -> None:
    from service.flows import status as status_flow

    with LLMStub(responder=lambda _: "I cannot answer in JSON, sorry.") as stub:
        live = service_factory(LLM_BASE_URL=stub.base_url, LLM_MODEL="m")
        live.client.post("/v1/turns", json=_turn("I'm a night-shift nurse.", "m1"))
        assert live.wait_for_extraction()["turns_failed"] == 1
        status_flow._failed_counts.clear()  # counted at most once a minute; not wait for it
        answer = live.client.post(
            "/v1/turns", json=_turn("I like tea.", "m2", chat={**CHAT, "chat_id": "other"})
        ).json()
    assert answer["notice"] is None
    assert answer["admin_notice"] == (
        "Memory (admins only): 1 turn failed extraction (`python -m service turns list`, "
        "then `turns retry-failed`)"
    )


def test_repairable_json_is_repaired(service_factory: Callable[..., LiveService]) -> None:
    answer = "{'operations': [{'op': 'NEW', 'content': 'User works nights', 'bank': 'personal',},]}"
    with LLMStub(responder=lambda _: answer) as stub:
        live = service_factory(LLM_BASE_URL=stub.base_url, LLM_MODEL="m")
        live.client.post("/v1/turns", json=_turn("I work nights.", "m2"))
        live.wait_for_extraction()
    assert _active(live) == ["User works nights"]


def test_same_fact_again_is_not_stored_twice(extracting: LiveService, llm: LLMStub) -> None:
    """Case 11: near-identical texts are a NONE."""
    llm.responder = by_message(
        {
            "cats": [new_op("User likes cats.", tags=["preference"])],
            "CATS": [new_op("user likes cats!!", tags=["preference"])],
        }
    )
    for i, message in enumerate(["I like cats.", "i like cats!!", "I LIKE CATS"]):
        extracting.client.post(
            "/v1/turns", json=_turn(message, f"m{i}", chat={**CHAT, "chat_id": f"s{i}"})
        )
    extracting.wait_for_extraction()
    assert _active(extracting) == ["User likes cats."]
    items = extracting.client.get("/v1/users/u1/memories").json()["items"]
    assert items[0]["confidence"] == 0.951  # 0.9 confirmed twice: 1 - 0.1 * 0.7 * 0.7


def test_update_supersedes_the_shown_memory_and_keeps_history(
    extracting: LiveService, llm: LLMStub
) -> None:
    """Case 16: the extractor sees the existing memory and updates it."""
    extracting.client.post("/v1/users/u1/memories", json={"content": "User works as a pharmacist"})
    llm.responder = by_message(
        {
            "paramedic": [
                new_op("User works as a paramedic", op="UPDATE", ref="m1", tags=["identity"])
            ]
        }
    )
    extracting.client.post("/v1/turns", json=_turn("I left pharmacy; I'm a paramedic now.", "m1"))
    extracting.wait_for_extraction()
    assert _active(extracting) == ["User works as a paramedic"]
    prompt = llm.requests[-1]["messages"][-1]["content"]
    assert "[m1] (personal; " in prompt and "User works as a pharmacist" in prompt


def test_a_turn_is_extracted_once_however_often_it_is_handed_over(
    extracting: LiveService, llm: LLMStub
) -> None:
    llm.responder = by_message({"beagle": [new_op("User has a beagle named Pepper")]})
    answers = [
        extracting.client.post(
            "/v1/turns", json=_turn("I have a beagle named Pepper", "m1")
        ).json()["status"]
        for _ in range(3)
    ]
    extracting.wait_for_extraction()
    assert answers == ["queued", "duplicate", "duplicate"]
    assert len(llm.requests) == 1
    assert _active(extracting) == ["User has a beagle named Pepper"]


def test_collaborative_chat_never_writes_personal_memories(
    extracting: LiveService, llm: LLMStub
) -> None:
    llm.responder = by_message(
        {
            "shellfish": [
                new_op("User is allergic to shellfish", bank="personal"),
                new_op("User prefers answers as short lists", bank="interaction_patterns"),
            ]
        }
    )
    chat = {
        **CHAT,
        "chat_id": "shared",
        "collaborative": True,
        "collaborative_reason": "channel",
        "kind": "channel",
    }
    extracting.client.post(
        "/v1/turns", json=_turn("I'm allergic to shellfish; keep it short.", "m1", chat=chat)
    )
    extracting.wait_for_extraction()
    items = extracting.client.get("/v1/users/u1/memories").json()["items"]
    assert [(m["bank"], m["content"]) for m in items] == [
        ("interaction_patterns", "User prefers answers as short lists")
    ]
    assert (
        "personal"
        not in llm.requests[-1]["messages"][-1]["content"]
        .split("Banks you may use:")[1]
        .splitlines()[0]
    )


def test_without_an_llm_turns_wait_and_the_status_says_why(service: LiveService) -> None:
    answer = service.client.post("/v1/turns", json=_turn("I keep bees", "m1")).json()
    assert answer == {
        "status": "queued",
        "detail": "turn saved; extraction waits until an LLM is configured",
        "notice": None,
        "admin_notice": "Memory (admins only): turns are kept, but learning waits until the "
        "memory service has an LLM (LLM_BASE_URL, LLM_MODEL); `python -m service doctor` "
        "checks it",
    }
    status = service.client.get("/v1/status").json()
    assert status["turns_queued"] == 1
    assert status["status"] == (
        "extraction paused: no LLM configured (set LLM_BASE_URL and LLM_MODEL); 1 turn waiting"
    )


def test_turns_waiting_without_an_llm_are_extracted_once_one_is_configured(
    service_factory: Callable[..., LiveService],
    llm: LLMStub,
) -> None:
    first = service_factory()
    first.client.post("/v1/turns", json=_turn("I keep bees", "m1"))
    first.stop()
    llm.responder = by_message({"bees": [new_op("User keeps bees")]})
    second = service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")
    assert second.wait_for_extraction()["turns_done"] == 1
    assert _active(second) == ["User keeps bees"]


def test_temporary_and_task_turns_write_nothing(extracting: LiveService, llm: LLMStub) -> None:
    """Cases 3 and 4 at the service: these kinds are skipped before any job exists."""
    for kind in ("temporary", "task", "api", "automated"):
        answer = extracting.client.post(
            "/v1/turns", json=_turn("I keep two beehives", f"m-{kind}", chat={**CHAT, "kind": kind})
        ).json()
        assert answer["status"] == "skipped"
    assert extracting.client.get("/v1/status").json()["turns_queued"] == 0
    assert llm.requests == []


def test_an_inferred_fact_is_marked_so_and_why_says_where_each_came_from(
    extracting: LiveService, llm: LLMStub
) -> None:
    """Provenance: a stated fact and an inferred one are told apart, also by `why`."""
    llm.responder = by_message(
        {
            "night shift": [
                new_op("User works night shifts"),
                {
                    **new_op("User probably sleeps during the day", confidence=0.6),
                    "source": "inferred",
                },
            ]
        }
    )
    extracting.client.post("/v1/turns", json=_turn("Back from my night shift again.", "m1"))
    extracting.wait_for_extraction()
    items = extracting.client.get("/v1/users/u1/memories").json()["items"]
    assert sorted((m["content"], m["source"]) for m in items) == [
        ("User probably sleeps during the day", "inference"),
        ("User works night shifts", "extraction"),
    ]
    extracting.client.post("/v1/context", json={"chat": CHAT, "message": "my night shift sleep"})
    why = extracting.client.post(
        "/v1/commands", json={"chat": CHAT, "command": "/memory why"}
    ).json()["text"]
    assert "confidence 0.60, inferred from a chat" in why
    assert "confidence 0.90, stated by the user in a chat" in why
