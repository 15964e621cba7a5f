"""Deleting chats or a user in a real Open WebUI forgets their memories (Memory Events function).

Open WebUI publishes `chat.deleted` / `chat.deleted_all` to active Event functions in a
background task after the delete call has answered, so the tests wait for the outcome.
"""

from __future__ import annotations

import pytest

from testkit.openwebui import OpenWebUIClient, Thread, system_text
from testkit.openwebui_stack import Stack, add_user
from testkit.waiting import wait_until

pytestmark = pytest.mark.e2e

EVENT_WAIT_S = 30
NOTHING_LEFT = "I don't remember anything in Chat Memory that this chat may see."


def _chat_memory(stack: Stack, user_id: str, chat_id: str) -> str:
    """The service's own listing of a chat's Chat Memory (`/memory list chat` in that chat)."""
    answer = stack.service.post(
        "/v1/commands",
        json={
            "chat": {"user_id": user_id, "kind": "saved", "chat_id": chat_id},
            "command": "/memory list chat",
        },
    )
    assert answer.status_code == 200, answer.text
    text: str = answer.json()["text"]
    return text


def _remember_in_chat(client: OpenWebUIClient, thread: Thread, fact: str) -> None:
    """Type `/memory add chat: …` in the chat, as a user would."""
    turn = client.send(thread, f"/memory add chat: {fact}")
    assert turn.reply.startswith("Remembered in Chat Memory:"), turn.reply


def test_deleting_a_chat_forgets_its_chat_memory_and_no_other(stack: Stack):
    a = stack.users["a"]
    alice = stack.client("a")
    doomed, kept = alice.new_thread("doomed"), alice.new_thread("kept")
    _remember_in_chat(alice, doomed, "The toast for Sam is on June 6")
    _remember_in_chat(alice, kept, "This chat drafts the eulogy for uncle Tom")
    mark = stack.model_log.mark()
    alice.send(doomed, "When is the toast for Sam?")
    injected = system_text(next(stack.model_log.iter_chat(mark)))

    deleted = alice.call("DELETE", f"/api/v1/chats/{doomed.chat_id}")

    assert deleted is True
    assert "The toast for Sam is on June 6" in injected  # it was real memory, read in its chat
    wait_until(
        lambda: _chat_memory(stack, a.id, doomed.chat_id) == NOTHING_LEFT,
        timeout_s=EVENT_WAIT_S,
        what="the deleted chat's memory to be forgotten",
    )
    assert "This chat drafts the eulogy for uncle Tom" in _chat_memory(stack, a.id, kept.chat_id)


def test_deleting_all_chats_forgets_the_chat_memory_of_each(stack: Stack):
    # The admin: the other users' chats are used by other tests.
    admin = stack.admin
    client = stack.client("admin")
    threads = [client.new_thread("first"), client.new_thread("second")]
    for thread, fact in zip(
        threads, ["The first chat plans a picnic", "The second chat plans a hike"], strict=True
    ):
        client.send(thread, "Let's plan something")  # the service learns the chat is theirs
        _remember_in_chat(client, thread, fact)
    listed = [_chat_memory(stack, admin.id, t.chat_id) for t in threads]

    deleted = client.call("DELETE", "/api/v1/chats/")

    assert deleted is True
    assert ["picnic" in listed[0], "hike" in listed[1]] == [True, True]
    for thread in threads:
        wait_until(
            lambda t=thread: _chat_memory(stack, admin.id, t.chat_id) == NOTHING_LEFT,
            timeout_s=EVENT_WAIT_S,
            what="every chat's memory to be forgotten",
        )


def test_deleting_a_user_forgets_their_memories_and_keeps_others(stack: Stack):
    admin = stack.client("admin")
    leaving = add_user(admin, "Leaving User", "leaving@example.com")
    for user_id, fact in (
        (leaving.id, "Leaving user keeps three ferrets"),
        (stack.users["b"].id, "Bob rides a red bicycle"),
    ):
        added = stack.service.post(f"/v1/users/{user_id}/memories", json={"content": fact})
        assert added.status_code == 201, added.text

    deleted = admin.call("DELETE", f"/api/v1/users/{leaving.id}")

    assert deleted is True
    wait_until(
        lambda: stack.service.get(f"/v1/users/{leaving.id}/memories").json()["items"] == [],
        timeout_s=EVENT_WAIT_S,
        what="the deleted user's memories to be forgotten",
    )
    kept = stack.service.get(f"/v1/users/{stack.users['b'].id}/memories").json()["items"]
    assert "Bob rides a red bicycle" in [m["content"] for m in kept]


def test_deleting_a_folder_with_its_chats_forgets_its_project_and_chat_memory(stack: Stack):
    a = stack.users["a"]
    alice = stack.client("a")
    folder = alice.call("POST", "/api/v1/folders/", json={"name": "Shed rebuild"})
    thread = alice.new_thread("shed", folder_id=folder["id"])
    added = stack.service.post(
        f"/v1/users/{a.id}/memories",
        json={
            "content": "The shed gets a green roof",
            "bank": "project",
            "folder_id": folder["id"],
        },
    )
    assert added.status_code == 201, added.text
    alice.send(thread, "Let's plan the shed")  # the service learns the chat's folder
    _remember_in_chat(alice, thread, "This chat lists the shed's timber")

    deleted = alice.call("DELETE", f"/api/v1/folders/{folder['id']}?delete_contents=true")

    assert deleted is True
    wait_until(
        lambda: (
            stack.service.get(
                f"/v1/users/{a.id}/memories", params={"folder_id": folder["id"], "bank": "project"}
            ).json()["items"]
            == []
        ),
        timeout_s=EVENT_WAIT_S,
        what="the folder's Project Memory to be forgotten",
    )
    wait_until(
        lambda: _chat_memory(stack, a.id, thread.chat_id) == NOTHING_LEFT,
        timeout_s=EVENT_WAIT_S,
        what="the folder chat's memory to be forgotten",
    )
