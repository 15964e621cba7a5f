"""Several people, one conversation, in a real Open WebUI: what reaches the model (DESIGN §3).

A folder shared through Open WebUI's access grants, a chat shared in continue mode and a
channel are collaborative: no Personal memory is read there (not even the sender's own),
each sender gets only their own Interaction Patterns, and a folder's members get its
Project Memory. Every assertion is on what the stand-in model received.
"""

from __future__ import annotations

from typing import Any

import pytest

from testkit.llm_stub import DEFAULT_REPLY, MODEL_ID
from testkit.openwebui import OpenWebUIClient, Thread, all_text, last_user_text
from testkit.openwebui_stack import Stack
from testkit.waiting import wait_until

pytestmark = pytest.mark.e2e

QUESTION = "What do we know about the lighthouse?"
#: label → memory text; every text mentions the lighthouse, so QUESTION recalls each of them
FACTS = {
    "personal a": "Alice's grandfather kept the lighthouse on Skerry Point",
    "personal b": "Bob proposed to his wife at the old lighthouse",
    "patterns a": "Alice wants lighthouse answers as short bullet points",
    "patterns b": "Bob wants lighthouse answers with a source for each claim",
    "project": "The lighthouse restoration uses copper-free paint",
    "private project": "Alice's private lighthouse model is built at 1:50 scale",
}
CHANNEL_WAIT_S = 30


def _recalled(request: dict[str, Any]) -> set[str]:
    """Labels of the seeded memories found anywhere in what the model received."""
    text = all_text(request)
    return {label for label, fact in FACTS.items() if fact in text}


def _ask(stack: Stack, client: OpenWebUIClient, thread: Thread) -> dict[str, Any]:
    """Send QUESTION in `thread`; the one chat request the model received for it."""
    mark = stack.model_log.mark()
    turn = client.send(thread, QUESTION)
    assert turn.reply == DEFAULT_REPLY
    seen = list(stack.model_log.iter_chat(mark))
    assert len(seen) == 1, [r.get("messages") for r in seen]
    return seen[0]


@pytest.fixture(scope="module")
def people(stack: Stack) -> dict[str, str]:
    """Alice and Bob each have one Personal and one Interaction Patterns memory."""
    ids = {who: stack.users[who].id for who in ("a", "b")}
    for who, user_id in ids.items():
        stack.forget_memories(user_id)
        stack.add_memory(user_id, FACTS[f"personal {who}"], bank="personal")
        stack.add_memory(user_id, FACTS[f"patterns {who}"], bank="interaction_patterns")
    return ids


@pytest.fixture(scope="module")
def shared_folder(stack: Stack, people: dict[str, str]) -> str:
    """A folder of Alice's, shared with Bob (write, continue mode), with one Project Memory."""
    alice = stack.client("a")
    folder = alice.call("POST", "/api/v1/folders/", json={"name": "Lighthouse restoration"})
    # Open WebUI checks each permission against its own grant row: write needs read too.
    alice.call(
        "POST",
        f"/api/v1/folders/{folder['id']}/access/update",
        json={
            "access_grants": [
                {"principal_type": "user", "principal_id": people["b"], "permission": permission}
                for permission in ("read", "write")
            ],
            "share_mode": "continue",
        },
    )
    stack.add_memory(people["a"], FACTS["project"], bank="project", folder_id=folder["id"])
    folder_id: str = folder["id"]
    return folder_id


@pytest.mark.usefixtures("people")
def test_private_chats_recall_their_owner_s_personal_memories(stack: Stack):
    # The control for the tests below: QUESTION does recall every Personal memory.
    alice, bob = stack.client("a"), stack.client("b")

    seen = {
        "alice": _ask(stack, alice, alice.new_thread()),
        "bob": _ask(stack, bob, bob.new_thread()),
    }

    assert {who: _recalled(request) for who, request in seen.items()} == {
        "alice": {"personal a", "patterns a"},
        "bob": {"personal b", "patterns b"},
    }


def test_a_private_folder_adds_its_project_memory_to_its_owner_s_personal_ones(
    stack: Stack,
    people: dict[str, str],
):
    alice = stack.client("a")
    folder = alice.call("POST", "/api/v1/folders/", json={"name": "Lighthouse model"})
    stack.add_memory(people["a"], FACTS["private project"], bank="project", folder_id=folder["id"])

    request = _ask(stack, alice, alice.new_thread(folder_id=folder["id"]))

    assert _recalled(request) == {"personal a", "patterns a", "private project"}


def test_a_shared_folder_gives_both_members_its_project_memory_and_nobody_a_personal_one(
    stack: Stack,
    people: dict[str, str],
    shared_folder: str,
):
    alice, bob = stack.client("a"), stack.client("b")
    as_bob = bob.call("GET", f"/api/v1/folders/{shared_folder}")
    alices_chat = alice.new_thread(folder_id=shared_folder)
    bobs_chat = bob.new_thread(folder_id=shared_folder)

    seen = {
        "alice in her chat": _ask(stack, alice, alices_chat),
        "bob in his chat": _ask(stack, bob, bobs_chat),
        "bob in alice's chat": _ask(stack, bob, alices_chat),
        "alice after bob": _ask(stack, alice, alices_chat),
    }

    assert (as_bob["user_id"], as_bob["write_access"]) == (people["a"], True)
    assert {who: _recalled(request) for who, request in seen.items()} == {
        "alice in her chat": {"project", "patterns a"},
        "bob in his chat": {"project", "patterns b"},
        "bob in alice's chat": {"project", "patterns b"},
        "alice after bob": {"project", "patterns a"},
    }


def test_a_chat_shared_in_continue_mode_reads_no_personal_memory(
    stack: Stack,
    people: dict[str, str],
):
    alice, bob = stack.client("a"), stack.client("b")
    thread = alice.new_thread()
    alice.call("POST", f"/api/v1/chats/{thread.chat_id}/share", json={"share_mode": "continue"})
    alice.call(
        "POST",
        f"/api/v1/chats/shared/{thread.chat_id}/access/update",
        json={
            "access_grants": [
                {"principal_type": "user", "principal_id": people["b"], "permission": "read"}
            ],
            "share_mode": "continue",
        },
    )

    seen = {"alice, owner": _ask(stack, alice, thread), "bob": _ask(stack, bob, thread)}

    assert {who: _recalled(request) for who, request in seen.items()} == {
        "alice, owner": {"patterns a"},
        "bob": {"patterns b"},
    }


def test_a_channel_at_model_turn_reads_no_personal_memory_of_the_sender(
    stack: Stack,
    people: dict[str, str],
):
    alice = stack.client("a")
    channel = alice.call(
        "POST",
        "/api/v1/channels/create",
        json={"name": "lighthouse-crew", "type": "group", "user_ids": [people["b"]]},
    )
    mark = stack.model_log.mark()

    posted = alice.call(
        "POST",
        f"/api/v1/channels/{channel['id']}/messages/post",
        json={"content": f"<@M:{MODEL_ID}|{MODEL_ID}> {QUESTION}"},
    )

    # Open WebUI answers the post at once and calls the model in a background task.
    request = wait_until(
        lambda: next(iter(stack.model_log.iter_chat(mark)), None),
        timeout_s=CHANNEL_WAIT_S,
        what="the channel's model call",
    )
    reply = wait_until(
        lambda: _model_reply(alice, channel["id"], posted["id"]),
        timeout_s=CHANNEL_WAIT_S,
        what="the model's reply in the channel",
    )
    assert last_user_text(request) == f"Alice: {MODEL_ID} {QUESTION}"
    assert reply["content"] == DEFAULT_REPLY
    assert len(list(stack.model_log.iter_chat(mark))) == 1
    assert _recalled(request) == {"patterns a"}


def _model_reply(
    client: OpenWebUIClient, channel_id: str, message_id: str
) -> dict[str, Any] | None:
    """The finished reply of the model in the thread of `message_id`, if there is one yet."""
    thread = client.call("GET", f"/api/v1/channels/{channel_id}/messages/{message_id}/thread")
    for message in thread:
        if (message.get("meta") or {}).get("model_id") == MODEL_ID and message.get(
            "content"
        ) == DEFAULT_REPLY:
            return dict(message)
    return None
