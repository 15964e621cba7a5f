"""Through a real Open WebUI 0.12.4, a memory is dated by the time the client stamped the user
message with, not by when Open WebUI stored it (`Chats.insert_chat_turn` overwrites a new
message's `timestamp` with its own clock) or when the service extracted it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from testkit.extraction_replies import by_message, new_op
from testkit.openwebui_stack import Stack
from testkit.waiting import wait_until

pytestmark = pytest.mark.e2e

FACT = "User's dentist is at the Lindenhof practice"
DAY_S = 86_400


@pytest.fixture
def dentist_facts(stack: Stack) -> Iterator[None]:
    responder = stack.extraction_stub.responder
    stack.extraction_stub.responder = by_message({"Lindenhof": [new_op(FACT)]})
    yield
    stack.extraction_stub.responder = responder


def test_a_message_written_ten_days_ago_gives_a_memory_dated_then(
    stack: Stack, dentist_facts: None
) -> None:
    b = stack.users["b"]
    stack.forget_memories(b.id)
    bob = stack.client("b")
    written_s = int(time.time()) - 10 * DAY_S
    thread = bob.new_thread("an old chat, replayed")  # a saved chat: its turns are stored
    # "remember that": due at once (batching), not after the quiet period
    turn = bob.send(
        thread, "Please remember that my dentist is at the Lindenhof practice.", timestamp=written_s
    )
    stored = bob.read_chat(thread.chat_id)["chat"]["history"]["messages"]
    [user_message] = [m for m in stored.values() if m["role"] == "user"]
    # the premise: Open WebUI keeps its own clock on the stored copy
    assert user_message["timestamp"] > written_s + DAY_S, user_message
    assert turn.stored is not None

    def dated() -> list[dict[str, object]] | None:
        items = stack.service.get(f"/v1/users/{b.id}/memories").json()["items"]
        return items or None

    [memory] = wait_until(dated, what="the dentist memory")
    assert memory["content"] == FACT
    created = datetime.fromisoformat(str(memory["created_at"]))
    assert created.date() == datetime.fromtimestamp(written_s, UTC).date()
    stack.forget_memories(b.id)
