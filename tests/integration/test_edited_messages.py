"""An edited message's old text is never extracted: only the branch the chat now holds.

Through the real filter file and the real service. In Open WebUI an edit makes a sibling of
the old user message; the outlet then carries the new branch (CONTRACT §3), and the turn of
the old text, still waiting for its batch, must not reach the LLM.
"""

from __future__ import annotations

import psycopg

from bench.chat_harness import FilterHarness, SavedChat, load_filter_instance
from testkit.extraction_replies import by_message, new_op, new_user_messages
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

TIMESTAMP = 1_780_000_000  # 2026-05-28
RULES = {
    "dog": [new_op("User has a dog named Rex")],
    "cat": [new_op("User has a cat named Rex")],
    "walks": [new_op("User walks Rex every morning")],
    "Lyon": [new_op("User lives in Lyon")],
}


def _harness(live: LiveService) -> FilterHarness:
    instance = load_filter_instance()
    instance.valves = instance.Valves(
        service_url=live.base_url, api_key=live.api_key, inlet_timeout_s=5, outlet_timeout_s=5
    )
    return FilterHarness(instance)


async def _say(harness: FilterHarness, chat: SavedChat, text: str, reply: str) -> None:
    body, metadata, user_message_id, assistant_id = chat.inlet_request(text)
    await harness.inlet(chat, body, metadata)
    outlet_body = chat.record_turn(
        user_message_id=user_message_id, text=text, assistant_id=assistant_id, reply=reply
    )
    await harness.outlet(chat, outlet_body, metadata)


def _edit_from(chat: SavedChat, index: int) -> None:
    """The user edits the user message at `index`: the branch now ends before it."""
    del chat.messages[index:]


async def test_an_edited_message_and_what_followed_it_are_not_extracted(
    service_factory,  # type: ignore[no-untyped-def]
    database_url: str,
) -> None:
    with LLMStub(responder=by_message(RULES)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="stub-model",
            MEMORY_BATCH_MESSAGES="5",
            MEMORY_BATCH_QUIET_S="3600",
        )
        harness = _harness(live)
        chat = SavedChat(
            user=harness.make_user(user_id="u-edit", name="Eda"), timestamp_s=TIMESTAMP
        )
        await _say(harness, chat, "I have a dog named Rex.", "Nice!")
        await _say(harness, chat, "He walks with me every morning.", "Lovely.")
        _edit_from(chat, 0)  # "dog" was a slip: the first message becomes "cat"
        await _say(harness, chat, "I have a cat named Rex.", "Nice!")
        await _say(harness, chat, "Please remember that I live in Lyon.", "Noted.")
        status = live.wait_for_extraction()
    sent = [[text for _, text in found] for r in llm.requests if (found := new_user_messages(r))]
    assert sent == [["I have a cat named Rex.", "Please remember that I live in Lyon."]]
    items = live.client.get("/v1/users/u-edit/memories").json()["items"]
    assert sorted(m["content"] for m in items) == ["User has a cat named Rex", "User lives in Lyon"]
    assert (status["turns_done"], status["turns_queued"], status["turns_failed"]) == (2, 0, 0)
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT status, error, payload ? 'texts' FROM turns ORDER BY id"
        ).fetchall()
    replaced = ("discarded", "replaced: the user edited an earlier message of this branch", False)
    # done turns keep their texts until the chat's rolling summary covers them
    assert rows == [replaced, replaced, ("done", None, True), ("done", None, True)]
