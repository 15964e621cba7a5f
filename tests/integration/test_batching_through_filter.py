"""Batches and the rolling chat summary through the real filter file and the real service."""

from __future__ import annotations

from typing import Any

import psycopg

from bench.chat_harness import FilterHarness, SavedChat, load_filter_instance
from service.core.batching import turn_tokens
from testkit.extraction_replies import (
    by_message,
    is_chat_summary_request,
    new_op,
    new_user_messages,
    with_chat_summaries,
)
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until

TIMESTAMP = 1_780_000_000  # 2026-05-28
TURNS = [
    ("We are planning the garden for the new house.", "Sounds fun!"),
    ("I want raised beds for tomatoes and basil.", "Good choice."),
    ("Please remember that my soil is heavy clay.", "Noted: heavy clay."),
    ("The beds will go along the south fence.", "Good light there."),
]
RULES = {
    "tomatoes": [new_op("User grows tomatoes and basil in raised beds")],
    "clay": [new_op("User's garden soil is heavy clay")],
    "south fence": [new_op("User's raised beds are along the south fence")],
}


def _harness(live: LiveService) -> FilterHarness:
    instance = load_filter_instance()
    instance.valves = instance.Valves(
        service_url=live.base_url, api_key=live.api_key, inlet_timeout_s=5, outlet_timeout_s=5
    )
    return FilterHarness(instance)


async def _say(harness: FilterHarness, chat: SavedChat, text: str, reply: str) -> str:
    """One full turn (inlet → model → outlet); returns the system text the model received."""
    body, metadata, user_message_id, assistant_id = chat.inlet_request(text)
    seen = await harness.inlet(chat, body, metadata)
    outlet_body = chat.record_turn(
        user_message_id=user_message_id, text=text, assistant_id=assistant_id, reply=reply
    )
    await harness.outlet(chat, outlet_body, metadata)
    return seen.system_text


def _wait_for(database_url: str, sql: str, expected: Any) -> None:
    def rows() -> list[tuple[Any, ...]]:
        with psycopg.connect(database_url) as conn:
            return conn.execute(sql).fetchall()

    wait_until(lambda: rows() == expected, what=f"{sql} to give {expected}")


async def test_a_chat_is_extracted_in_batches_summarised_and_never_twice(
    service_factory,
    database_url: str,  # type: ignore[no-untyped-def]
) -> None:
    threshold = sum(turn_tokens(text, reply) for text, reply in TURNS[:3])
    with LLMStub(responder=with_chat_summaries(by_message(RULES))) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="stub-model",
            MEMORY_BATCH_MESSAGES="5",
            MEMORY_BATCH_QUIET_S="3600",
            MEMORY_CHAT_SUMMARY_TOKENS=str(threshold),
        )
        harness = _harness(live)
        user = harness.make_user(user_id="gardener", name="Gil")
        chat = SavedChat(user=user, timestamp_s=TIMESTAMP)
        for text, reply in TURNS[:3]:  # the third asks to remember: the batch runs at once
            await _say(harness, chat, text, reply)
        _wait_for(database_url, "SELECT versions FROM chat_summaries", [(1,)])
        extraction = [
            [t for _, t in found] for r in llm.requests if (found := new_user_messages(r))
        ]
        summaries = [r for r in llm.requests if is_chat_summary_request(r)]
        # the same chat handed over again under new message ids: nothing is processed twice
        replay = SavedChat(user=user, timestamp_s=TIMESTAMP, chat_id=chat.chat_id)
        for text, reply in TURNS[:3]:
            await _say(harness, replay, text, reply)
        requests_after_replay = len(llm.requests)
        in_chat = await _say(harness, chat, "What did we decide about the garden beds?", "…")
        other = SavedChat(user=user, timestamp_s=TIMESTAMP)
        elsewhere = await _say(harness, other, "What did we decide about the garden beds?", "…")
        status = live.client.get("/v1/status").json()
    assert extraction == [[text for text, _ in TURNS[:3]]]
    assert len(summaries) == 1
    assert requests_after_replay == 2
    with psycopg.connect(database_url) as conn:
        turns = conn.execute("SELECT user_message_id, status FROM turns ORDER BY id").fetchall()
        summary = conn.execute(
            "SELECT content FROM memories WHERE source_kind = 'chat_summary'"
        ).fetchall()
    assert [s for _, s in turns] == ["done", "done", "done", "queued", "queued"]
    assert [m for m, _ in turns[:3]] == [m["id"] for m in chat.messages[0:6:2]]
    expected = " ".join(f"Gil: {text}" for text, _ in TURNS[:3])
    assert summary == [(expected,)]
    assert expected in in_chat  # read in its own chat …
    assert "heavy clay" in in_chat
    assert expected not in elsewhere  # … and never in another chat of the same user
    assert "User's garden soil is heavy clay" in elsewhere  # Personal facts travel
    assert status["turns_queued"] == 2  # the two questions wait for their batch
