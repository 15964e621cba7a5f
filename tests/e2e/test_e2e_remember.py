"""The "Remember this" button in a real Open WebUI 0.12.4: invoked as the UI does
(`POST /api/chat/actions/memory_action` with the chat's branch), its status line stored on
the message, the memory then listed by `/memory list` and injected in a later chat."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from service.core.remember import REPLY_PREFIX
from testkit.extraction_replies import new_op
from testkit.llm_stub import MODEL_ID
from testkit.openwebui import ARTIFACTS, OpenWebUIClient, Thread, system_text
from testkit.openwebui_stack import Stack
from testkit.waiting import wait_until

pytestmark = pytest.mark.e2e

FACT = "User keeps a pet narwhal named Gus"


@pytest.fixture
def remembering_llm(stack: Stack) -> Iterator[None]:
    """The service's LLM answers FACT for a click's prompt only (a turn's own extraction
    stays empty, so the click is what stores it)."""
    before = stack.extraction_stub.responder

    def respond(request: dict[str, Any]) -> str:
        if REPLY_PREFIX.strip() in json.dumps(request.get("messages"), ensure_ascii=False):
            return json.dumps({"operations": [{**new_op(FACT), "message": "u1"}]})
        return json.dumps({"operations": []})

    stack.extraction_stub.responder = respond
    yield
    stack.extraction_stub.responder = before


def _click(client: OpenWebUIClient, thread: Thread, message_id: str) -> Any:
    """What Chat.svelte's chatActionHandler posts for a click under `message_id`."""
    chat = client.read_chat(thread.chat_id)["chat"]
    history = chat["history"]["messages"]
    branch: list[dict[str, Any]] = []
    current: str | None = message_id
    while current:
        message = history[current]
        branch.insert(0, message)
        current = message.get("parentId")
    return client.call(
        "POST",
        "/api/chat/actions/memory_action",
        json={
            "model": MODEL_ID,
            "messages": [
                {
                    "id": m["id"],
                    "role": m["role"],
                    "content": m.get("content", ""),
                    "timestamp": m.get("timestamp"),
                }
                for m in branch
            ],
            "chat_id": thread.chat_id,
            "session_id": None,
            "id": message_id,
        },
    )


def _status_lines(client: OpenWebUIClient, thread: Thread, message_id: str) -> list[str]:
    message = client.read_chat(thread.chat_id)["chat"]["history"]["messages"][message_id]
    return [s.get("description", "") for s in message.get("statusHistory") or []]


def test_a_reply_remembered_with_the_button_is_listed_and_recalled_later(
    stack: Stack, remembering_llm: None
) -> None:
    b = stack.users["b"]
    stack.forget_memories(b.id)
    bob = stack.client("b")
    thread = bob.new_thread("narwhal")
    bob.send(thread, "Let me tell you about Gus, my narwhal.")
    reply_id = thread.parent_id
    assert reply_id is not None

    first = _click(bob, thread, reply_id)
    second = _click(bob, thread, reply_id)

    assert first["status_line"].startswith(f"Remembered: {FACT} (#")
    assert second["status_line"].startswith("Already remembered: ")
    lines = wait_until(
        lambda: (
            _status_lines(bob, thread, reply_id)[-2:]
            if len(_status_lines(bob, thread, reply_id)) >= 2
            and _status_lines(bob, thread, reply_id)[-1].startswith("Already")
            else None
        ),
        what="the two clicks' status lines",
    )
    assert lines[0].startswith(f"Remembered: {FACT} (#")
    code = lines[0].rsplit("(#", 1)[1].rstrip(")")
    assert lines[1] == f"Already remembered: {FACT} (#{code})"
    export = stack.service.get(f"/v1/users/{b.id}/memories/export").json()
    assert [(m["content"], m["bank"], m["source_chat_id"]) for m in export] == [
        (FACT, "personal", thread.chat_id)
    ]

    listed = bob.send(bob.new_thread("list"), "/memory list").reply
    assert f"`{code}`" in listed and "narwhal named Gus" in listed

    mark = stack.model_log.mark()
    bob.send(bob.new_thread("later"), "Which sea animal do I keep at home?")
    prompts = [system_text(r) for r in stack.model_log.iter_chat(mark)]
    assert any(FACT in p for p in prompts), prompts


def test_the_remember_button_clicked_in_the_browser_shows_what_it_stored(
    stack: Stack, remembering_llm: None
) -> None:
    from tests.e2e.test_e2e_commands import _run_browser

    a = stack.users["a"]
    stack.forget_memories(a.id)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    report = _run_browser(
        stack,
        a.email,
        [
            {
                "text": "Gus the narwhal lives with me.",
                "click_action": "Remember this",
                "action_expect_lines": [f"Remembered: {FACT} (#"],
            }
        ],
        str(ARTIFACTS / "remember-button.png"),
    )

    (reply,) = report["replies"]
    assert f"Remembered: {FACT} (#" in reply["after_action"]
    export = stack.service.get(f"/v1/users/{a.id}/memories/export").json()
    assert [(m["content"], m["source_chat_id"], m["source_message_id"]) for m in export] == [
        (FACT, report["chat_id"], reply["id"])
    ]


def test_a_click_under_a_memory_help_answer_stores_nothing_and_says_why(
    stack: Stack, remembering_llm: None
) -> None:
    # issue 30 item 6: 0.12.4 shows the button under a /memory answer too (the answer is
    # stored as the chat model's reply); the click stores nothing and says so
    b = stack.users["b"]
    stack.forget_memories(b.id)
    bob = stack.client("b")
    thread = bob.new_thread("help")
    mark = stack.model_log.mark()
    helped = bob.send(thread, "/memory help")
    reply_id = thread.parent_id
    assert reply_id is not None and helped.reply.startswith("**Memory commands**")

    clicked = _click(bob, thread, reply_id)

    refused = (
        "Not remembered: this is a /memory command or its answer, not something said in the "
        "chat — to keep a fact, type `/memory add <fact>`"
    )
    assert clicked["status_line"] == refused
    assert wait_until(
        lambda: _status_lines(bob, thread, reply_id)[-1:] or None, what="the click's line"
    ) == [refused]
    assert stack.service.get(f"/v1/users/{b.id}/memories/export").json() == []
    assert list(stack.model_log.iter_chat(mark)) == []  # no model, no extraction prompt
