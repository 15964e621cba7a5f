"""`/memory …` commands typed in a real Open WebUI: the exact answer, and no LLM call for it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from typing import Any

import pytest

from testkit.llm_stub import DEFAULT_REPLY
from testkit.openwebui import ARTIFACTS, PLAYWRIGHT_PYTHON, REPO, all_text
from testkit.openwebui_stack import USER_PASSWORD, Stack

pytestmark = pytest.mark.e2e

FACT = "User keeps bees"
REFUSAL = "This model only answers /memory commands typed in a chat."
BROWSER_SCRIPT = REPO / "tests" / "e2e" / "browser.py"
README_SCREENSHOT = REPO / "docs" / "img" / "memory-list.png"
BROWSER_TIMEOUT_S = 180


def _service_answer(
    stack: Stack, user_id: str, command: str, *, kind: str = "saved", chat_id: str = ""
) -> str:
    """What the service itself answers to a command for this user and chat."""
    answer = stack.service.post(
        "/v1/commands",
        json={"chat": {"user_id": user_id, "kind": kind, "chat_id": chat_id}, "command": command},
    )
    assert answer.status_code == 200, answer.text
    text: str = answer.json()["text"]
    return text


def _turns_total(stack: Stack) -> int:
    status = stack.service.get("/v1/status").json()
    return int(status["turns_queued"] + status["turns_done"] + status["turns_failed"])


def _shown_lines(markdown: str) -> list[str]:
    """The lines of a Markdown answer as a browser shows them (markers and emphasis removed)."""
    lines = []
    for line in markdown.splitlines():
        line = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", line.strip())  # list markers
        line = re.sub(r"^#+\s*", "", line).replace("**", "").replace("`", "")
        if line and not line.startswith("```"):
            lines.append(" ".join(line.split()))
    return lines


@pytest.fixture
def alice_keeps_bees(stack: Stack) -> str:
    """Alice has exactly one memory; returns her id."""
    a = stack.users["a"]
    stack.forget_memories(a.id)
    stack.add_memory(a.id, FACT)
    return a.id


@pytest.mark.parametrize("variant", ["json", "stream", "stream-session"])
def test_memory_list_in_a_saved_chat_is_exact_and_costs_no_llm_call(
    stack: Stack,
    alice_keeps_bees: str,
    variant: str,
):
    alice = stack.client("a")
    thread = alice.new_thread()
    expected = _service_answer(stack, alice_keeps_bees, "/memory list", chat_id=thread.chat_id)
    turns_before = _turns_total(stack)
    mark = stack.model_log.mark()

    turn = alice.send(
        thread,
        "/memory list",
        stream=variant != "json",
        session_id=f"e2e-{uuid.uuid4()}" if variant == "stream-session" else None,
    )

    assert FACT in expected
    assert stack.model_log.since(mark) == []
    assert turn.reply == expected
    assert turn.stored is not None and turn.stored["content"] == expected
    if variant == "json":
        assert turn.response["choices"][0]["message"]["content"] == expected
        assert turn.response["model"] == "memory_commands"
    elif variant == "stream":
        assert turn.response is None
    else:
        assert turn.response["status"] is True
    assert _turns_total(stack) == turns_before  # a command is never handed to extraction


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_memory_list_without_a_chat_answers_exactly_without_llm(
    stack: Stack,
    alice_keeps_bees: str,
    stream: bool,
):
    expected = _service_answer(stack, alice_keeps_bees, "/memory list", kind="api")
    mark = stack.model_log.mark()

    turn = stack.client("a").send_without_chat("/memory list", stream=stream)

    assert turn.reply == expected
    assert stack.model_log.since(mark) == []


@pytest.mark.usefixtures("alice_keeps_bees")
def test_commands_are_hidden_from_the_model_on_the_next_turn(stack: Stack):
    alice = stack.client("a")
    thread = alice.new_thread()
    alice.send(thread, "/memory list")
    mark = stack.model_log.mark()

    turn = alice.send(thread, "Thanks. What is a good first hive?")

    assert turn.reply == DEFAULT_REPLY
    seen = list(stack.model_log.iter_chat(mark))
    assert len(seen) == 1
    assert "/memory" not in all_text(seen[0])
    assert [m["role"] for m in seen[0]["messages"]] == ["system", "user"]


def test_a_mistyped_bank_prefix_is_answered_unknown_bank_and_nothing_is_saved(stack: Stack):
    # issue 30 item 9c: `Projcet:` was saved to Personal without a word
    b = stack.users["b"]
    stack.forget_memories(b.id)
    bob = stack.client("b")

    turn = bob.send(bob.new_thread(), "/memory add Projcet: deadline is Friday")

    assert turn.reply == (
        "unknown bank 'Projcet'; use personal, interaction\\_patterns, project, chat or "
        "assistant. Nothing was saved."
    )
    assert stack.service.get(f"/v1/users/{b.id}/memories/export").json() == []


def test_the_pipe_model_called_directly_refuses(stack: Stack):
    mark = stack.model_log.mark()

    turn = stack.client("b").send_without_chat("Hello pipe", model="memory_commands")

    assert turn.reply == REFUSAL
    assert stack.model_log.since(mark) == []


def _run_browser(
    stack: Stack, email: str, messages: list[dict[str, Any]], screenshot: str
) -> dict[str, Any]:
    """Drive headless Chromium with the Playwright venv; returns browser.py's report."""
    job = {
        "base_url": stack.base_url,
        "email": email,
        "password": USER_PASSWORD,
        "messages": messages,
        "screenshot": screenshot,
        "timeout_s": 60,
    }
    done = subprocess.run(
        [str(PLAYWRIGHT_PYTHON), str(BROWSER_SCRIPT)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_memory_add_then_list_typed_in_the_browser_shows_the_exact_listing(stack: Stack):
    a = stack.users["a"]
    stack.forget_memories(a.id)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "memory-list.png"
    mark = stack.model_log.mark()

    report = _run_browser(
        stack,
        a.email,
        [
            {"text": "/memory add I keep bees", "expect_lines": ["User keeps bees"]},
            {"text": "/memory list", "expect_lines": ["User keeps bees"]},
        ],
        str(screenshot),
    )

    expected = _service_answer(stack, a.id, "/memory list", chat_id=report["chat_id"])
    added, listed = report["replies"]
    assert "User keeps bees" in added["content"]
    assert listed["content"] == expected
    assert "User keeps bees" in expected
    shown = " ".join(listed["rendered"].split())
    assert [line for line in _shown_lines(expected) if line not in shown] == []
    stored = stack.client("a").read_chat(report["chat_id"])["chat"]["history"]["messages"]
    assert stored[listed["id"]]["content"] == expected
    assert list(stack.model_log.iter_chat(mark)) == []
    if os.environ.get("E2E_UPDATE_README_SCREENSHOT"):  # ids and dates differ on every run
        README_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(screenshot, README_SCREENSHOT)
