"""A reminder set and fired through a real Open WebUI, as the model receives it."""

from __future__ import annotations

import pytest

from testkit.openwebui import system_text
from testkit.openwebui_stack import Stack

pytestmark = pytest.mark.e2e

SECTION = "Reminders (the user asked to be reminded of these now"


def test_a_topic_reminder_is_confirmed_then_fires_once_in_a_private_chat(stack: Stack):
    bob = stack.client("b")
    thread = bob.new_thread("garden")
    mark = stack.model_log.mark()
    bob.send(thread, "Remind me when we talk about the garden to buy tomato seeds.")
    (setting,) = list(stack.model_log.iter_chat(mark))
    assert "Reminder set by this message" in system_text(setting)
    assert "buy tomato seeds" in system_text(setting)

    mark = stack.model_log.mark()
    bob.send(thread, "What should I plant in my garden this spring?")
    bob.send(thread, "And how often should I water the garden beds?")
    firing, later = list(stack.model_log.iter_chat(mark))
    assert SECTION in system_text(firing) and "buy tomato seeds" in system_text(firing)
    assert "buy tomato seeds" not in system_text(later)  # fired exactly once

    listing = stack.service.post(
        "/v1/commands",
        json={
            "chat": {"user_id": stack.users["b"].id, "kind": "saved", "chat_id": thread.chat_id},
            "command": "/memory reminders",
        },
    ).json()["text"]
    assert "buy tomato seeds" in listing and "done" in listing
