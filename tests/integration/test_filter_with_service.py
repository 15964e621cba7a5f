"""The real filter file against the real service over HTTP, called as Open WebUI calls it."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from bench.chat_harness import FilterHarness, SavedChat, load_filter_instance
from service.embeddings.encoder import Encoder
from testkit.extraction_replies import by_message, new_op
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

TIMESTAMP = 1_780_000_000  # 2026-05-28


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(
        responder=by_message(
            {
                "vegetarian": [new_op("User is vegetarian", tags=["preference"])],
                "beagle Pepper": [new_op("User has a beagle named Pepper", tags=["possession"])],
                "half-marathon": [
                    new_op("User is training for a half-marathon in October", tags=["goal"])
                ],
                "beehives": [new_op("User keeps two beehives in the garden", tags=["possession"])],
                "observatory": [new_op("User works at the observatory", tags=["identity"])],
            }
        )
    ) as stub:
        yield stub


@pytest.fixture
def live(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")


@pytest.fixture
def harness(live: LiveService) -> FilterHarness:
    instance = load_filter_instance()
    instance.valves = instance.Valves(
        service_url=live.base_url, api_key=live.api_key, inlet_timeout_s=5, outlet_timeout_s=5
    )
    return FilterHarness(instance)


async def _say(harness: FilterHarness, chat: SavedChat, text: Any, reply: str = "OK.") -> str:
    """One full turn (inlet → model → outlet); returns the system text the model received."""
    body, metadata, user_id, assistant_id = chat.inlet_request("")
    body["messages"][-1]["content"] = text
    metadata["user_message"]["content"] = text
    seen = await harness.inlet(chat, body, metadata)
    outlet_body = chat.record_turn(
        user_message_id=user_id, text=text, assistant_id=assistant_id, reply=reply
    )
    await harness.outlet(chat, outlet_body, metadata)
    return seen.system_text


def _chat(harness: FilterHarness, user_id: str, name: str = "Alex") -> SavedChat:
    return SavedChat(user=harness.make_user(user_id=user_id, name=name), timestamp_s=TIMESTAMP)


async def test_cold_start_first_fact_is_stored_and_injected_in_the_next_chat(
    harness: FilterHarness, live: LiveService
) -> None:
    """Case 9."""
    first = await _say(harness, _chat(harness, "new-user"), "Quick note: I'm vegetarian.")
    assert first == ""
    live.wait_for_extraction()
    second = await _say(harness, _chat(harness, "new-user"), "Suggest a dinner for tonight.")
    assert "User is vegetarian" in second
    assert "<userMemories>" in second


async def test_image_parts_are_ignored_and_never_stored(
    harness: FilterHarness, live: LiveService, db_conn: psycopg.AsyncConnection
) -> None:
    """Case 10."""
    image = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    content = [
        {"type": "text", "text": "This is my beagle Pepper at the beach"},
        {"type": "image_url", "image_url": {"url": image}},
    ]
    await _say(harness, _chat(harness, "dog-owner"), content)
    live.wait_for_extraction()
    items = live.client.get("/v1/users/dog-owner/memories").json()["items"]
    assert [m["content"] for m in items] == ["User has a beagle named Pepper"]
    for table in ("memories", "memory_events", "turns"):
        row = await (
            await db_conn.execute(f"SELECT count(*) FROM {table} t WHERE t::text LIKE '%iVBOR%'")
        ).fetchone()
        assert row == (0,), table


async def test_a_message_that_is_only_an_image_still_gets_the_core_memories(
    harness: FilterHarness, live: LiveService
) -> None:
    # issue 30 item 9a: a turn without text got no memories at all
    for fact in ("User is vegetarian", "User has a beagle named Pepper"):
        assert live.client.post(
            "/v1/users/picture-sender/memories", json={"content": fact}
        ).is_success
    image = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    only_an_image = [{"type": "image_url", "image_url": {"url": image}}]

    seen = await _say(harness, _chat(harness, "picture-sender"), only_an_image)

    assert "<userMemories>" in seen
    assert "User is vegetarian" in seen and "User has a beagle named Pepper" in seen
    assert "iVBOR" not in seen
    other = await _say(harness, _chat(harness, "someone-else"), only_an_image)
    assert other == ""  # another user's turn gets none of them


async def test_one_users_memories_never_reach_another_user(
    harness: FilterHarness, live: LiveService
) -> None:
    """Case 28."""
    await _say(
        harness, _chat(harness, "user-a", "Ann"), "I'm training for a half-marathon in October."
    )
    live.wait_for_extraction()
    b_sees = await _say(harness, _chat(harness, "user-b", "Ben"), "What am I training for?")
    a_sees = await _say(harness, _chat(harness, "user-a", "Ann"), "What am I training for?")
    assert b_sees == ""
    assert "half-marathon" in a_sees


@pytest.mark.parametrize(
    "task",
    [
        "title_generation",
        "tags_generation",
        "follow_up_generation",
        "query_generation",
        "autocomplete_generation",
    ],
)
async def test_background_tasks_are_untouched(
    harness: FilterHarness, live: LiveService, llm: LLMStub, encoder: Encoder, task: str
) -> None:
    """Case 3: body byte-identical, no lookup, nothing stored."""
    chat = _chat(harness, "task-user")
    prompt = (
        "### Task: Generate a concise 3-5 word title with an emoji for the chat below. "
        "<chat_history>USER: I keep two beehives in my garden</chat_history>"
    )
    body, metadata, user_id, assistant_id = chat.inlet_request(prompt)
    metadata["task"] = task
    before = json.dumps(body, sort_keys=True, default=str)
    embeds = encoder.hits + encoder.misses
    seen = await harness.inlet(chat, body, metadata)
    assert json.dumps(seen.body, sort_keys=True, default=str) == before
    out = chat.record_turn(
        user_message_id=user_id, text=prompt, assistant_id=assistant_id, reply="🐝 Beekeeping"
    )
    await harness.outlet(chat, copy.deepcopy(out), metadata)
    assert encoder.hits + encoder.misses == embeds
    status = live.client.get("/v1/status").json()
    assert (status["turns_queued"], status["turns_done"], status["memories_active"]) == (0, 0, 0)
    assert llm.requests == []


async def test_temporary_chat_reads_but_never_writes(
    harness: FilterHarness, live: LiveService, llm: LLMStub
) -> None:
    """Case 4."""
    live.client.post(
        "/v1/users/temp-user/memories", json={"content": "User has savings of 9 months"}
    )
    chat = _chat(harness, "temp-user")
    chat.chat_id = "local:7f3a"
    text = (
        "Hypothetically, if I quit my job at the observatory next month, how long would my "
        "savings last?"
    )
    seen = await _say(harness, chat, text)
    assert "User has savings of 9 months" in seen
    status = live.client.get("/v1/status").json()
    assert (status["turns_queued"], status["turns_done"]) == (0, 0)
    assert llm.requests == []
    assert live.client.get("/v1/users/temp-user/memories").json()["total"] == 1


async def test_chat_goes_on_without_memory_when_the_service_is_down(
    harness: FilterHarness, live: LiveService
) -> None:
    """Case 27 against the real service, stopped."""
    live.stop()
    chat = _chat(harness, "someone")
    body, metadata, user_id, assistant_id = chat.inlet_request("Hello!")
    seen = await harness.inlet(chat, body, metadata)
    assert seen.body["messages"] == [{"role": "user", "content": "Hello!"}]
    assert seen.events[-1]["data"]["description"] == "Memory unavailable — answering without it"
    out = await harness.outlet(
        chat,
        chat.record_turn(
            user_message_id=user_id, text="Hello!", assistant_id=assistant_id, reply="Hi"
        ),
        metadata,
    )
    assert out.body["id"] == assistant_id


@pytest.mark.parametrize("role", ["user", "admin"])
async def test_without_an_llm_only_admins_are_told_why_nothing_is_learned(
    service: LiveService, role: str
) -> None:
    instance = load_filter_instance()
    instance.valves = instance.Valves(service_url=service.base_url, api_key=service.api_key)
    harness = FilterHarness(instance)
    chat = _chat(harness, f"no-llm-{role}")
    chat.user["role"] = role
    body, metadata, user_id, assistant_id = chat.inlet_request("I keep bees.")
    await harness.inlet(chat, body, metadata)
    out = await harness.outlet(
        chat,
        chat.record_turn(
            user_message_id=user_id, text="I keep bees.", assistant_id=assistant_id, reply="Nice!"
        ),
        metadata,
    )
    assert [e["data"]["description"] for e in out.events] == {
        "user": [],
        "admin": [
            "Memory (admins only): turns are kept, but "
            "learning waits until the memory service has an LLM (LLM_BASE_URL, LLM_MODEL); "
            "`python -m service doctor` checks it"
        ],
    }[role]
    assert service.client.get("/v1/status").json()["turns_queued"] == 1


async def test_models_of_external_providers_get_no_memory(
    harness: FilterHarness, live: LiveService
) -> None:
    """Case 34: the admin lists external models; they never see a memory, local ones do."""
    live.client.post(
        "/v1/users/heart/memories", json={"content": "User is being treated for a heart condition"}
    )
    harness.instance.valves = harness.instance.Valves(
        **{**harness.instance.valves.model_dump(), "no_memory_models": "gpt-4o, openrouter/*"}
    )
    seen = {}
    for model in ("gpt-4o", "openrouter/claude", "llama3.1:8b"):
        chat = _chat(harness, "heart")
        body, metadata, _, _ = chat.inlet_request("Suggest a weekly workout plan.")
        body["model"] = model
        seen[model] = (await harness.inlet(chat, body, metadata)).system_text
    assert seen["gpt-4o"] == "" and seen["openrouter/claude"] == ""
    assert "heart condition" in seen["llama3.1:8b"]
