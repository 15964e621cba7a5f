"""What reaches the model through a real Open WebUI with the filter installed (DESIGN §2, §3)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from testkit.llm_stub import DEFAULT_REPLY, MODEL_ID
from testkit.openwebui import all_text, system_text
from testkit.openwebui_stack import Stack
from testkit.waiting import wait_until

pytestmark = pytest.mark.e2e

FACT = "User keeps bees"
NATIVE_FACT = "NATIVE-MEMORY-MARKER prefers tea"
NATIVE_BLOCK = "<memory_context>"
OUR_BLOCK = "<userMemories>"
NATIVE_MEMORY_ON = {"features": {"memory": True}}  # what the browser sends by default


def _turns_total(stack: Stack) -> int:
    """Turns the service ever accepted (queued, done or failed)."""
    status = stack.service.get("/v1/status").json()
    return int(status["turns_queued"] + status["turns_done"] + status["turns_failed"])


def _only_chat_request(stack: Stack, mark: int) -> dict[str, Any]:
    seen = list(stack.model_log.iter_chat(mark))
    assert len(seen) == 1, [r.get("messages") for r in seen]
    return seen[0]


@pytest.fixture(scope="module")
def native_memory_of_a(stack: Stack) -> str:
    """Give Alice one memory in Open WebUI's own memory store.

    Open WebUI stores the row, then fails to embed it (the stub has no embeddings endpoint)
    and answers 500; the row is what its built-in injection reads, so it is enough.
    """
    a = stack.users["a"]
    httpx.post(
        f"{stack.base_url}/api/v1/memories/add",
        trust_env=False,
        timeout=30,
        headers={"Authorization": f"Bearer {a.token}"},
        json={"content": NATIVE_FACT, "type": "user"},
    )
    stored = stack.client("a").call("GET", "/api/v1/memories/")
    assert [m["content"] for m in stored] == [NATIVE_FACT]
    return NATIVE_FACT


@pytest.fixture
def alice_memory_off(stack: Stack) -> Iterator[None]:
    """Alice switches the filter off for herself (UserValves `enabled`) for one test."""
    alice = stack.client("a")
    alice.call(
        "POST", "/api/v1/functions/id/memory_filter/valves/user/update", json={"enabled": False}
    )
    yield
    alice.call(
        "POST", "/api/v1/functions/id/memory_filter/valves/user/update", json={"enabled": True}
    )


def test_saved_chat_turn_gets_the_service_memory_and_never_the_native_one(
    stack: Stack,
    native_memory_of_a: str,
):
    a = stack.users["a"]
    alice = stack.client("a")
    stack.forget_memories(a.id)
    thread = alice.new_thread()

    mark = stack.model_log.mark()
    first = alice.send(thread, "Hello, what do you know about me?", extra=NATIVE_MEMORY_ON)
    before = _only_chat_request(stack, mark)
    stack.add_memory(a.id, FACT)
    mark = stack.model_log.mark()
    second = alice.send(thread, "What should I do this weekend?", extra=NATIVE_MEMORY_ON)
    after = _only_chat_request(stack, mark)

    assert first.reply == second.reply == DEFAULT_REPLY
    assert OUR_BLOCK not in all_text(before) and FACT not in all_text(before)
    assert FACT in system_text(after)
    assert OUR_BLOCK in system_text(after)
    for request in (before, after):
        assert NATIVE_BLOCK not in all_text(request)
        assert native_memory_of_a not in all_text(request)
    assert [m["content"] for m in after["messages"][1:]] == [
        "Hello, what do you know about me?",
        DEFAULT_REPLY,
        "What should I do this weekend?",
    ]


@pytest.mark.usefixtures("alice_memory_off")
def test_native_memory_does_reach_the_model_when_a_user_switches_the_filter_off(
    stack: Stack,
    native_memory_of_a: str,
):
    # The control for the test above: without our filter, the native block is injected.
    stack.forget_memories(stack.users["a"].id)
    stack.add_memory(stack.users["a"].id, FACT)
    mark = stack.model_log.mark()

    stack.client("a").send(stack.client("a").new_thread(), "Hello", extra=NATIVE_MEMORY_ON)

    request = _only_chat_request(stack, mark)
    assert NATIVE_BLOCK in system_text(request)
    assert native_memory_of_a in system_text(request)
    assert FACT not in all_text(request)


@pytest.mark.parametrize(
    "variant", ["saved", "saved-stream", "saved-stream-session", "no-chat", "no-chat-stream"]
)
def test_another_user_never_gets_the_memory(stack: Stack, variant: str):
    stack.forget_memories(stack.users["b"].id)
    if not any(
        m["content"] == FACT
        for m in stack.service.get(f"/v1/users/{stack.users['a'].id}/memories").json()["items"]
    ):
        stack.add_memory(stack.users["a"].id, FACT)
    bob = stack.client("b")
    mark = stack.model_log.mark()

    if variant.startswith("saved"):
        turn = bob.send(
            bob.new_thread(),
            "Do I keep any animals?",
            stream="stream" in variant,
            session_id=f"e2e-{uuid.uuid4()}" if "session" in variant else None,
        )
    else:
        turn = bob.send_without_chat("Do I keep any animals?", stream="stream" in variant)

    assert turn.reply == DEFAULT_REPLY
    request = _only_chat_request(stack, mark)
    assert FACT not in all_text(request)
    assert OUR_BLOCK not in all_text(request)


def test_title_generation_task_gets_no_memory(stack: Stack):
    a = stack.users["a"]
    stack.forget_memories(a.id)
    stack.add_memory(a.id, FACT)
    admin = stack.client("admin")
    config = admin.call("GET", "/api/v1/tasks/config")
    admin.call(
        "POST", "/api/v1/tasks/config/update", json={**config, "ENABLE_TITLE_GENERATION": True}
    )
    thread = stack.client("a").new_thread()
    mark = stack.model_log.mark()
    try:
        answer = stack.client("a").call(
            "POST",
            "/api/v1/tasks/title/completions",
            json={
                "model": MODEL_ID,
                "chat_id": thread.chat_id,
                "messages": [
                    {"role": "user", "content": "Tell me about my hobbies"},
                    {"role": "assistant", "content": "Gladly."},
                ],
            },
        )
    finally:
        admin.call(
            "POST", "/api/v1/tasks/config/update", json={**config, "ENABLE_TITLE_GENERATION": False}
        )

    assert answer["choices"][0]["message"]["content"] == DEFAULT_REPLY
    request = _only_chat_request(stack, mark)
    assert "Generate a concise title" in all_text(request)
    assert FACT not in all_text(request)
    assert OUR_BLOCK not in all_text(request)


def test_automation_turn_gets_no_memory_and_hands_nothing_over(stack: Stack):
    a = stack.users["a"]
    stack.forget_memories(a.id)
    stack.add_memory(a.id, FACT)
    alice = stack.client("a")
    thread = alice.new_thread()
    turns_before = _turns_total(stack)
    mark = stack.model_log.mark()

    alice.send(thread, "Scheduled check-in", extra={"automation_id": "e2e-automation"})
    automated = _only_chat_request(stack, mark)
    mark = stack.model_log.mark()
    alice.send(thread, "And now me, by hand")
    by_hand = _only_chat_request(stack, mark)

    assert FACT not in all_text(automated)
    assert FACT in system_text(by_hand)
    # Only the turn typed by hand is handed over; the automated one before it is not.
    wait_until(
        lambda: _turns_total(stack) >= turns_before + 1,
        timeout_s=10,
        what="the hand-typed turn to reach the service",
    )
    assert _turns_total(stack) == turns_before + 1


@pytest.mark.parametrize("prefix", ["local:", "temporary:"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_temporary_chat_reads_memories_but_hands_nothing_over(
    stack: Stack,
    prefix: str,
    stream: bool,
):
    # Over REST any client may send a temporary chat id; Open WebUI stores no chat for it.
    a = stack.users["a"]
    stack.forget_memories(a.id)
    stack.add_memory(a.id, FACT)
    alice = stack.client("a")
    turns_before = _turns_total(stack)
    mark = stack.model_log.mark()
    text = "Remind me of my hobby"

    answer = alice.call(
        "POST",
        "/api/chat/completions",
        json={
            "model": MODEL_ID,
            "stream": stream,
            "chat_id": f"{prefix}{uuid.uuid4()}",
            "id": str(uuid.uuid4()),
            "messages": [{"role": "user", "content": text}],
            "user_message": {
                "id": str(uuid.uuid4()),
                "role": "user",
                "content": text,
                "parentId": None,
                "models": [MODEL_ID],
            },
        },
    )
    temporary = _only_chat_request(stack, mark)
    alice.send(alice.new_thread(), "A saved turn after it")

    if stream:
        assert answer is None  # the reply of a streamed temporary turn is not kept anywhere
    else:
        assert answer["choices"][0]["message"]["content"] == DEFAULT_REPLY
    assert FACT in system_text(temporary)
    wait_until(
        lambda: _turns_total(stack) >= turns_before + 1,
        timeout_s=10,
        what="the saved turn to reach the service",
    )
    assert _turns_total(stack) == turns_before + 1
