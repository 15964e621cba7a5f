"""Relative dates in extraction are read in the user's time zone, not in UTC."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import pytest

from testkit.extraction_replies import new_op
from testkit.llm_stub import LLMStub

CURRENT_DATE = re.compile(r"^Current date: (\d{4}-\d{2}-\d{2}) ", re.MULTILINE)


def _tomorrow_from_the_prompt(request: dict[str, Any]) -> str:
    """An LLM that makes "tomorrow" absolute with the prompt's current date, as told to."""
    prompt = request["messages"][-1]["content"]
    found = CURRENT_DATE.search(prompt)
    if found is None:
        return json.dumps({"operations": []})
    tomorrow = date.fromisoformat(found.group(1)) + timedelta(days=1)
    return json.dumps(
        {"operations": [new_op(f"User has a dentist appointment on {tomorrow.isoformat()}")]}
    )


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(responder=_tomorrow_from_the_prompt) as stub:
        yield stub


def test_tomorrow_said_on_a_california_evening_is_the_next_local_day(
    service_factory,  # type: ignore[no-untyped-def]
    llm: LLMStub,
) -> None:
    live = service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")
    chat = {
        "user_id": "u1",
        "chat_id": "c1",
        "kind": "saved",
        "timezone": "America/Los_Angeles",
    }
    turn = {
        "chat": chat,
        "user_message_id": "m1",
        "user_message": "I have a dentist appointment tomorrow.",
        # Wednesday 2026-03-11, 21:30 in California (PDT, UTC-7): already Thursday in UTC
        "occurred_at": "2026-03-12T04:30:00Z",
    }
    assert live.client.post("/v1/turns", json=turn).status_code == 202
    assert live.wait_for_extraction()["turns_done"] == 1
    prompt = llm.requests[-1]["messages"][-1]["content"]
    assert "Current date: 2026-03-11 (Wednesday)" in prompt
    assert "[u1] 2026-03-11 (Wednesday)\n<new_user_message>" in prompt
    items = live.client.get("/v1/users/u1/memories").json()["items"]
    assert [m["content"] for m in items] == ["User has a dentist appointment on 2026-03-12"]
