"""What a user sees in the browser when memories go into a reply: the status line (issue 15
item 9's screenshot, docs/img/recalled-status.png)."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

from testkit.openwebui import ARTIFACTS, REPO, status_lines, system_text
from testkit.openwebui_stack import Stack
from tests.e2e.test_e2e_commands import _run_browser

pytestmark = pytest.mark.e2e

README_SCREENSHOT = REPO / "docs" / "img" / "recalled-status.png"
QUESTION = "What should I plant for my bees this spring?"
ANSWER = (
    "Lavender, borage and thyme flower for months, and your bees on the rooftop will love them."
)


def test_a_reply_with_a_memory_shows_the_recalled_line_in_the_browser(stack: Stack):
    a = stack.users["a"]
    stack.forget_memories(a.id)
    screenshot = ARTIFACTS / "recalled-status.png"
    original = stack.model_stub.responder

    def answer(request: dict[str, Any]) -> str:
        return ANSWER if "rooftop" in system_text(request) else original(request)

    stack.model_stub.responder = answer
    mark = stack.model_log.mark()
    try:
        report = _run_browser(
            stack,
            a.email,
            [
                {"text": "/memory add I keep bees on my rooftop", "expect_lines": ["rooftop"]},
                {"text": QUESTION, "expect_lines": ["Recalled 1 memory", ANSWER]},
            ],
            str(screenshot),
        )
    finally:
        stack.model_stub.responder = original

    added, replied = report["replies"]
    stored = stack.client("a").read_chat(report["chat_id"])["chat"]["history"]["messages"]
    seen = list(stack.model_log.iter_chat(mark))
    assert "User keeps bees on their rooftop" in added["content"], added["content"]
    assert replied["content"] == ANSWER
    assert "Recalled 1 memory" in replied["rendered"]
    assert status_lines(stored[replied["id"]])[0] == "Recalled 1 memory"
    assert len(seen) == 1 and "User keeps bees on their rooftop" in system_text(seen[0])
    if os.environ.get("E2E_UPDATE_README_SCREENSHOT"):  # ids and dates differ on every run
        shutil.copyfile(screenshot, README_SCREENSHOT)
