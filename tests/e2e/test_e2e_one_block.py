"""One memory block per turn and no fact twice, in a real Open WebUI 0.12.4 (issue 15 item 3).

The worst cases: the best match of the message is also in the user's core profile, or (for
a user without a profile yet) also one of the core memories sent with every message. The
conftest's `no_injected_block_holds_a_fact_twice` checks every other test's requests too.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from service.core import profile as profile_policy
from testkit.llm_stub import DEFAULT_REPLY
from testkit.openwebui import OpenWebUIClient, system_text
from testkit.openwebui_stack import Stack, add_user
from testkit.waiting import wait_until
from tests.support import memory_blocks

pytestmark = pytest.mark.e2e

BEES = "User keeps bees on a rooftop in Lyon"
OTHERS = [
    "User plays the cello in an amateur orchestra",
    "User is allergic to penicillin",
    "User drives an old green Volvo",
    "User works night shifts as a nurse",
]
QUESTION = "How are the bees on my rooftop in Lyon doing this spring?"
_NOTE = re.compile(r"^- \(\d{4}-\d{2}-\d{2}\) (.+)$", re.MULTILINE)


def _profile_from_notes(
    fallback: Callable[[dict[str, Any]], Any],
) -> Callable[[dict[str, Any]], Any]:
    """The service's LLM writes a profile that repeats each note as a sentence (the worst
    case for repeats); every other request goes to `fallback`."""

    def respond(request: dict[str, Any]) -> Any:
        messages = request.get("messages") or []
        if messages and messages[0].get("content") == profile_policy.PROMPT:
            notes = _NOTE.findall(str(messages[-1].get("content", "")))
            return " ".join(f"{note}." for note in notes)
        return fallback(request)

    return respond


@pytest.fixture
def newcomer(stack: Stack) -> Iterator[tuple[str, OpenWebUIClient]]:
    """A fresh ordinary user: (id, client)."""
    tag = uuid.uuid4().hex[:8]
    account = add_user(stack.client("admin"), f"Dana {tag}", f"dana-{tag}@example.com")
    client = OpenWebUIClient(stack.base_url, account)
    yield account.id, client
    stack.forget_memories(account.id)
    client.close()


def _command(stack: Stack, user_id: str, command: str) -> str:
    answer = stack.service.post(
        "/v1/commands",
        json={"chat": {"user_id": user_id, "kind": "saved", "chat_id": ""}, "command": command},
    )
    assert answer.status_code == 200, answer.text
    text: str = answer.json()["text"]
    return text


def _only_request(stack: Stack, mark: int) -> dict[str, Any]:
    seen = list(stack.model_log.iter_chat(mark))
    assert len(seen) == 1, [r.get("messages") for r in seen]
    return seen[0]


def test_the_best_match_already_in_the_profile_is_injected_once(
    stack: Stack, newcomer: tuple[str, OpenWebUIClient]
):
    user_id, client = newcomer
    original = stack.extraction_stub.responder
    stack.extraction_stub.responder = _profile_from_notes(original)
    try:
        for fact in [BEES, *OTHERS]:  # five memories: the service writes a profile
            stack.add_memory(user_id, fact)
        wait_until(
            lambda: (
                (p := _command(stack, user_id, "/memory profile")).startswith(
                    "**Your core profile**"
                )
                and BEES in p
                and p
            ),
            what="the core profile to be written",
        )
    finally:
        stack.extraction_stub.responder = original
    mark = stack.model_log.mark()

    turn = client.send(client.new_thread(), QUESTION)

    request = _only_request(stack, mark)
    report = memory_blocks.check_request(request)
    assert turn.reply == DEFAULT_REPLY
    assert all(f"{fact}." in report.profile for fact in [BEES, *OTHERS]), report.profile
    assert (report.blocks, report.problems) == (1, [])
    assert BEES in report.profile  # the worst case was reached: the fact is in the profile …
    assert BEES not in report.facts  # … so it is not an item again
    assert system_text(request).count(BEES) == 1


def test_the_best_match_that_is_also_a_core_memory_is_injected_once(
    stack: Stack, newcomer: tuple[str, OpenWebUIClient]
):
    user_id, client = newcomer
    for fact in [BEES, *OTHERS[:2]]:  # fewer than five: no profile, core memories instead
        stack.add_memory(user_id, fact)
    thread = client.new_thread()
    mark = stack.model_log.mark()

    client.send(thread, QUESTION)
    why = client.send(thread, "/memory why").reply

    request = _only_request(stack, mark)
    report = memory_blocks.check_request(request)
    assert (report.blocks, report.problems) == (1, [])
    assert report.profile == ""
    assert sorted(report.facts) == sorted([BEES, *OTHERS[:2]])
    assert system_text(request).count(BEES) == 1
    why_lines = [line for line in why.splitlines() if line.startswith("- ")]
    assert len(why_lines) == 3
    bees = [line for line in why_lines if BEES in line]
    assert len(bees) == 1 and "similarity " in bees[0]
    assert sum("core profile, sent with every message" in line for line in why_lines) == 2
