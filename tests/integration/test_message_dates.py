"""A memory is dated by the message it came from, not by when the service extracted it: an
old chat replayed through the filter, a turn extracted after an LLM outage, and a message
whose timestamp cannot be right (`service/core/message_time.py`)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from bench.chat_harness import FilterHarness, SavedChat, load_filter_instance
from testkit.extraction_replies import echo_fact, new_op
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

CURRENT_DATE = re.compile(r"^Current date: (\d{4}-\d{2}-\d{2}) ", re.MULTILINE)
DAY_S = 86_400


def _tomorrow_from_the_prompt(request: dict[str, Any]) -> str:
    """An LLM that makes "tomorrow" absolute with the prompt's current date, as told to."""
    found = CURRENT_DATE.search(request["messages"][-1]["content"])
    if found is None or "dentist" not in request["messages"][-1]["content"]:
        return json.dumps({"operations": []})
    tomorrow = date.fromisoformat(found.group(1)) + timedelta(days=1)
    return json.dumps(
        {"operations": [new_op(f"User has a dentist appointment on {tomorrow.isoformat()}")]}
    )


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(responder=_tomorrow_from_the_prompt) as stub:
        yield stub


@pytest.fixture
def live(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")


@pytest.fixture
def harness(live: LiveService) -> FilterHarness:
    instance = load_filter_instance()
    instance.valves = instance.Valves(
        service_url=live.base_url, api_key=live.api_key, inlet_timeout_s=10, outlet_timeout_s=10
    )
    return FilterHarness(instance)


async def _say(harness: FilterHarness, chat: SavedChat, text: str) -> str:
    """One full turn (inlet → model → outlet); returns the system text the model received."""
    body, metadata, user_id, assistant_id = chat.inlet_request(text)
    seen = await harness.inlet(chat, body, metadata)
    outlet_body = chat.record_turn(
        user_message_id=user_id, text=text, assistant_id=assistant_id, reply="Noted."
    )
    await harness.outlet(chat, outlet_body, metadata)
    return seen.system_text


def _memories(live: LiveService, user_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = live.client.get(f"/v1/users/{user_id}/memories").json()["items"]
    return items


async def test_a_chat_replayed_ten_days_later_is_dated_by_its_messages(
    harness: FilterHarness, live: LiveService
) -> None:
    now_s = int(time.time())
    written_s = now_s - 10 * DAY_S
    written = datetime.fromtimestamp(written_s, UTC).date()
    user = harness.make_user(user_id="replayer", name="Robin")
    # the client stamps the message 10 days back; Open WebUI stores its copy with today's clock
    old_chat = SavedChat(user=user, timestamp_s=written_s, stored_at_s=now_s)

    await _say(harness, old_chat, "I have a dentist appointment tomorrow.")
    live.wait_for_extraction()

    [memory] = _memories(live, "replayer")
    appointment = written + timedelta(days=1)  # "tomorrow" of the day it was written
    assert memory["content"] == f"User has a dentist appointment on {appointment.isoformat()}"
    assert datetime.fromisoformat(memory["created_at"]).date() == written
    # the read path: dated then, and the appointment is over by today
    seen = await _say(
        harness, SavedChat(user=user, timestamp_s=now_s), "When is my dentist appointment?"
    )
    today = datetime.fromtimestamp(now_s, UTC).date()
    assert f"- [{written.isoformat()}] User has a dentist appointment" in seen, seen
    assert f"(past: {appointment.isoformat()} is before today, {today.isoformat()})" in seen, seen


class _OneOutage:
    """The LLM is down for the first call (HTTP 500), then answers; notes when it was called."""

    def __init__(self) -> None:
        self.calls: list[datetime] = []
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        with self._lock:
            self.calls.append(datetime.now(UTC))
            first = len(self.calls) == 1
        if first:
            raise ConnectionError("the model server is down")
        return echo_fact(request)


def test_a_turn_extracted_after_an_llm_outage_is_dated_when_it_arrived(
    service_factory,  # type: ignore[no-untyped-def]
) -> None:
    outage = _OneOutage()
    with LLMStub(responder=outage) as stub:
        live = service_factory(
            LLM_BASE_URL=stub.base_url,
            LLM_MODEL="stub-model",
            MEMORY_EXTRACTION_RETRY_BASE_S="1",
        )
        # no occurred_at (an API client, or a filter that could not read the message's time)
        turn = {
            "chat": {"user_id": "u-late", "chat_id": "chat-late", "kind": "saved"},
            "user_message_id": "m1",
            "user_message": "Remember fact-ferns: I grow ferns.",
        }
        assert live.client.post("/v1/turns", json=turn).status_code == 202
        assert live.wait_for_extraction()["turns_done"] == 1
    [memory] = _memories(live, "u-late")
    assert memory["content"] == "User mentioned fact-ferns"
    assert len(outage.calls) >= 2
    # dated when the turn arrived, before the LLM was first asked (and failed) — not when the
    # retry extracted it
    assert datetime.fromisoformat(memory["created_at"]) < outage.calls[0]


@pytest.fixture
def echo(service_factory) -> Iterator[LiveService]:  # type: ignore[no-untyped-def]
    with LLMStub(responder=echo_fact) as stub:
        yield service_factory(LLM_BASE_URL=stub.base_url, LLM_MODEL="stub-model")


@pytest.mark.parametrize(
    "written",
    [
        pytest.param(lambda: datetime.now(UTC) + timedelta(days=2), id="two days ahead"),
        pytest.param(lambda: datetime(1999, 6, 1, tzinfo=UTC), id="before 2000"),
    ],
)
def test_a_message_time_that_cannot_be_right_dates_the_memory_on_arrival(
    echo: LiveService, written: Any
) -> None:
    turn = {
        "chat": {"user_id": "u-clock", "chat_id": "chat-clock", "kind": "saved"},
        "user_message_id": "m1",
        "user_message": "Remember fact-clock: my clock is wrong.",
        "occurred_at": written().isoformat(),
    }
    before = datetime.now(UTC)
    assert echo.client.post("/v1/turns", json=turn).status_code == 202
    after = datetime.now(UTC)
    echo.wait_for_extraction()
    [memory] = _memories(echo, "u-clock")
    assert before <= datetime.fromisoformat(memory["created_at"]) <= after
