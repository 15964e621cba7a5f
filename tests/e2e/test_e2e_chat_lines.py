"""Small things a user meets in a real Open WebUI 0.12.4 chat (issue 15 items 6 and 7): a
wrong forget-all code says so, pausing shows in the chat, and the help names the `chat:` bank
and which memory is in use."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from service.core import commands
from testkit.openwebui import OpenWebUIClient, status_lines
from testkit.openwebui_stack import Stack, add_user

pytestmark = pytest.mark.e2e

PAUSED = "Memory is paused: nothing new is learned from this chat (/memory resume)"
_CODE = re.compile(r"`/memory forget all (\S+)`")


@pytest.fixture
def newcomer(stack: Stack) -> Iterator[tuple[str, OpenWebUIClient]]:
    """A fresh ordinary user with one memory: (id, client)."""
    tag = uuid.uuid4().hex[:8]
    account = add_user(stack.client("admin"), f"Eve {tag}", f"eve-{tag}@example.com")
    stack.add_memory(account.id, "User keeps bees")
    client = OpenWebUIClient(stack.base_url, account)
    yield account.id, client
    stack.forget_memories(account.id)
    client.close()


def _active(stack: Stack, user_id: str) -> list[str]:
    page = stack.service.get(f"/v1/users/{user_id}/memories").json()
    return [m["content"] for m in page["items"]]


def test_forget_all_with_a_wrong_code_says_so_and_forgets_nothing(
    stack: Stack, newcomer: tuple[str, OpenWebUIClient]
):
    user_id, client = newcomer
    thread = client.new_thread()

    asked = client.send(thread, "/memory forget all").reply
    code = _CODE.search(asked)
    wrong = client.send(thread, "/memory forget all zzzzzz").reply

    assert code is not None and code.group(1) != "zzzzzz"
    assert asked.startswith("This forgets your only Personal or Interaction Patterns memory")
    assert wrong.startswith(
        "`zzzzzz` is not the confirmation code (a code is only good until your memories "
        "change), so nothing was forgotten. This forgets your only Personal"
    ), wrong
    assert wrong.endswith(f"`/memory forget all {code.group(1)}`")
    assert _active(stack, user_id) == ["User keeps bees"]


def test_pause_shows_in_the_chat_beside_the_recalled_line_and_resume_ends_it(
    stack: Stack, newcomer: tuple[str, OpenWebUIClient]
):
    _, client = newcomer
    thread = client.new_thread()

    paused = client.send(thread, "/memory pause").reply
    while_paused = status_lines(client.send(thread, "How are my bees doing?").stored)
    resumed = client.send(thread, "/memory resume").reply
    after = status_lines(client.send(thread, "And my bees now?").stored)

    assert paused.startswith("Paused"), paused
    assert resumed.startswith("Resumed"), resumed
    # Open WebUI shows a message's last status line: it carries both
    assert while_paused == ["Recalled 1 memory", f"Recalled 1 memory · {PAUSED}"]
    assert after == ["Recalled 1 memory"]


def test_the_help_names_the_chat_bank_and_which_memory_is_in_use(
    stack: Stack, newcomer: tuple[str, OpenWebUIClient]
):
    _, client = newcomer
    shown = client.send(client.new_thread(), "/memory help").reply

    assert shown == commands.HELP_TEXT
    assert "Open WebUI's own memory is\nnot used in these chats" in shown
    assert "`chat:` is\n  remembered in this chat only" in shown
