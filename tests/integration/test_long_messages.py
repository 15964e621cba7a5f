"""Messages longer than the service's limit: the filter shortens what it sends, keeping the
end, so memory keeps working for that turn and the following ones of the chat.

Through the real filter file and the real service.
"""

from __future__ import annotations

from typing import Any

import psycopg

from bench.chat_harness import (
    DEFAULT_FILTER_PATH as FILTER_PATH,
)
from bench.chat_harness import (
    FilterHarness,
    HookCall,
    SavedChat,
    load_filter_instance,
)
from service.core import limits
from testkit.extraction_replies import by_message, new_op, new_user_messages
from testkit.filter_loader import load_filter
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

TIMESTAMP = 1_780_000_000  # 2026-05-28
PASTE = "log line: nothing to see here\n" * 1_500  # 45,000 characters of pasted log
REQUEST = "Please remember that I maintain the billing service."


def _harness(live: LiveService) -> FilterHarness:
    instance = load_filter_instance()
    instance.valves = instance.Valves(
        service_url=live.base_url, api_key=live.api_key, inlet_timeout_s=5, outlet_timeout_s=5
    )
    return FilterHarness(instance)


def _statuses(call: HookCall) -> list[str]:
    return [str(e.get("data", {}).get("description")) for e in call.events]


async def _say(
    harness: FilterHarness, chat: SavedChat, text: str, reply: str
) -> tuple[HookCall, HookCall]:
    body, metadata, user_message_id, assistant_id = chat.inlet_request(text)
    seen = await harness.inlet(chat, body, metadata)
    outlet_body = chat.record_turn(
        user_message_id=user_message_id, text=text, assistant_id=assistant_id, reply=reply
    )
    return seen, await harness.outlet(chat, outlet_body, metadata)


def test_the_filter_sends_at_most_the_services_message_limit() -> None:
    module: Any = load_filter(FILTER_PATH)
    assert module.MAX_SENT_CHARS == limits.MAX_MESSAGE_CHARS


async def test_a_message_longer_than_the_limit_keeps_memory_working_for_the_chat(
    service_factory,  # type: ignore[no-untyped-def]
    database_url: str,
) -> None:
    rules = {
        "billing": [new_op("User maintains the billing service")],
        "Lisbon": [new_op("User lives in Lisbon")],
    }
    with LLMStub(responder=by_message(rules)) as llm:
        live = service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")
        harness = _harness(live)
        chat = SavedChat(user=harness.make_user(user_id="u-long", name="Lo"), timestamp_s=TIMESTAMP)
        long_text = PASTE + REQUEST
        inlet, outlet = await _say(harness, chat, long_text, "Noted. " + PASTE)
        live.wait_for_extraction()
        # the next turn carries the long message and reply in its history
        later_inlet, later_outlet = await _say(
            harness, chat, "Please remember that I live in Lisbon.", "Noted."
        )
        status = live.wait_for_extraction()
    assert _statuses(inlet) == []  # nothing to recall yet, and no "Memory unavailable"
    assert _statuses(later_inlet) == ["Recalled 1 memory"]
    assert _statuses(outlet) == _statuses(later_outlet) == []
    assert (status["turns_done"], status["turns_failed"]) == (2, 0)
    sent = [text for r in llm.requests for _, text in new_user_messages(r)]
    assert len(sent[0]) == limits.MAX_MESSAGE_CHARS
    assert sent[0].endswith(REQUEST) and sent[0].startswith("… ")
    items = live.client.get("/v1/users/u-long/memories").json()["items"]
    assert sorted(m["content"] for m in items) == [
        "User lives in Lisbon",
        "User maintains the billing service",
    ]
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT status FROM turns ORDER BY id").fetchall()
    assert rows == [("done",), ("done",)]
