"""Open WebUI's background tasks never carry memories (DESIGN §3, issue 14 item 4).

Title, tag and follow-up generation are switched on for this module (the stack starts with
them off). After each turn Open WebUI sends the chat's transcript to the task model (here
the same stand-in model) without running any filter; every assertion is on what that model
received: no /memory command, no command answer, no injected memory block.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.llm_stub import DEFAULT_REPLY, MODEL_ID
from testkit.openwebui import all_text, last_user_text
from testkit.openwebui_stack import Stack
from testkit.waiting import wait_until

pytestmark = pytest.mark.e2e

SECRET_FACT = "Alice keeps the spare house key under the blue flowerpot"
QUESTION = "Where is the spare house key?"
BACKGROUND_TASKS = {"title_generation": True, "tags_generation": True, "follow_up_generation": True}
TASKS_PER_SAVED_TURN = 3  # follow-ups, title, tags
TASK_WAIT_S = 60


def _task_requests(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requests whose prompt is one of Open WebUI's task templates."""
    return [r for r in requests if last_user_text(r).lstrip().startswith("### Task:")]


def _wait_for_tasks(stack: Stack, mark: int, count: int) -> list[dict[str, Any]]:
    return wait_until(
        lambda: (
            found
            if len(found := _task_requests(list(stack.model_log.iter_chat(mark)))) >= count
            else None
        ),
        timeout_s=TASK_WAIT_S,
        what=f"{count} task requests",
    )


@pytest.fixture(scope="module")
def background_tasks_on(stack: Stack) -> Iterator[None]:
    """Title, tags and follow-ups on (Open WebUI's defaults); restored afterwards."""
    admin = stack.client("admin")
    before = admin.call("GET", "/api/v1/tasks/config")
    admin.call(
        "POST",
        "/api/v1/tasks/config/update",
        json={
            **before,
            "ENABLE_TITLE_GENERATION": True,
            "ENABLE_TAGS_GENERATION": True,
            "ENABLE_FOLLOW_UP_GENERATION": True,
        },
    )
    yield
    admin.call("POST", "/api/v1/tasks/config/update", json=before)


@pytest.fixture
def alice_has_a_secret(stack: Stack) -> str:
    alice = stack.users["a"]
    stack.forget_memories(alice.id)
    stack.add_memory(alice.id, SECRET_FACT)
    return alice.id


@pytest.mark.usefixtures("background_tasks_on", "alice_has_a_secret")
def test_title_tag_and_follow_up_requests_carry_no_memory_command_or_answer(stack: Stack):
    alice = stack.client("a")
    thread = alice.new_thread()
    mark = stack.model_log.mark()

    listed = alice.send(thread, "/memory list", extra={"background_tasks": BACKGROUND_TASKS})
    exported = alice.send(thread, "/memory export", extra={"background_tasks": BACKGROUND_TASKS})
    asked = alice.send(thread, QUESTION, extra={"background_tasks": BACKGROUND_TASKS})
    tasks = _wait_for_tasks(stack, mark, 3 * TASKS_PER_SAVED_TURN)

    chat = [r for r in stack.model_log.iter_chat(mark) if r not in tasks]
    assert SECRET_FACT in listed.reply and SECRET_FACT in exported.reply
    assert asked.reply == DEFAULT_REPLY
    # The control: the chat turn itself does recall the memory, without the command turns.
    assert len(chat) == 1 and SECRET_FACT in all_text(chat[0])
    assert "/memory" not in all_text(chat[0])
    assert len(tasks) == 3 * TASKS_PER_SAVED_TURN
    assert [
        (SECRET_FACT in all_text(r), "/memory" in all_text(r), "Your memories" in all_text(r))
        for r in tasks
    ] == [(False, False, False)] * len(tasks)
    assert all(QUESTION in all_text(r) for r in tasks[-TASKS_PER_SAVED_TURN:])


@pytest.mark.usefixtures("background_tasks_on", "alice_has_a_secret")
def test_a_mistyped_command_and_its_hint_reach_no_model_not_even_a_task(stack: Stack):
    # issue 30 item 2: the hint says "Nothing was sent to the model"; so it must be
    alice = stack.client("a")
    thread = alice.new_thread()
    mark = stack.model_log.mark()

    typo = alice.send(thread, "/memroy list", extra={"background_tasks": BACKGROUND_TASKS})
    asked = alice.send(thread, QUESTION, extra={"background_tasks": BACKGROUND_TASKS})
    tasks = _wait_for_tasks(stack, mark, 2 * TASKS_PER_SAVED_TURN)

    assert len(tasks) == 2 * TASKS_PER_SAVED_TURN
    assert typo.reply.startswith("Did you mean `/memory list`?")
    assert typo.reply.endswith("Nothing was sent to the model.")
    assert asked.reply == DEFAULT_REPLY
    everything = [all_text(r) for r in stack.model_log.iter_chat(mark)]
    assert len(everything) == 1 + 2 * TASKS_PER_SAVED_TURN  # the question, and the tasks
    assert [("/memroy" in t, "Nothing was sent" in t) for t in everything] == [
        (False, False)
    ] * len(everything)


@pytest.mark.usefixtures("background_tasks_on", "alice_has_a_secret")
def test_follow_ups_of_a_temporary_chat_carry_no_memory_block(stack: Stack):
    # A temporary chat has no stored history: Open WebUI hands the follow-up task the very
    # messages the model received, with the memory block the filter added to them.
    alice = stack.client("a")
    mark = stack.model_log.mark()

    answer = alice.call(
        "POST",
        "/api/chat/completions",
        json={
            "model": MODEL_ID,
            "stream": False,
            "chat_id": f"temporary:{uuid.uuid4()}",
            "id": str(uuid.uuid4()),
            "messages": [{"role": "user", "content": QUESTION}],
            "background_tasks": BACKGROUND_TASKS,
        },
    )
    tasks = _wait_for_tasks(stack, mark, 1)

    chat = [r for r in stack.model_log.iter_chat(mark) if r not in tasks]
    assert answer["choices"][0]["message"]["content"] == DEFAULT_REPLY
    assert len(chat) == 1 and SECRET_FACT in all_text(chat[0])
    assert len(tasks) == 1 and QUESTION in all_text(tasks[0])
    assert SECRET_FACT not in all_text(tasks[0])
