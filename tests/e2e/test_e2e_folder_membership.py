"""Project Memory reaches exactly the members of its folder, now (DESIGN §3, issue 14 item 5).

A chat shared in continue mode that sits in its owner's private folder does not make the
collaborator a member of that folder; a grant that was revoked ends membership even for the
user's own chat left in the folder. Every assertion is on what the stand-in model received.
"""

from __future__ import annotations

from typing import Any

import pytest

from testkit.llm_stub import DEFAULT_REPLY
from testkit.openwebui import OpenWebUIClient, Thread, all_text
from testkit.openwebui_stack import Stack

pytestmark = pytest.mark.e2e

QUESTION = "What do we know about the greenhouse?"
PRIVATE_PROJECT = "Alice's private greenhouse plan uses a north-facing cold frame"
SHARED_PROJECT = "The shared greenhouse project waters the tomatoes at six"


def _ask(stack: Stack, client: OpenWebUIClient, thread: Thread) -> dict[str, Any]:
    """Send QUESTION in `thread`; the one chat request the model received for it."""
    mark = stack.model_log.mark()
    turn = client.send(thread, QUESTION)
    assert turn.reply == DEFAULT_REPLY
    seen = list(stack.model_log.iter_chat(mark))
    assert len(seen) == 1, [r.get("messages") for r in seen]
    return seen[0]


def _grant(client: OpenWebUIClient, folder_id: str, user_ids: list[str]) -> None:
    client.call(
        "POST",
        f"/api/v1/folders/{folder_id}/access/update",
        json={
            "access_grants": [
                {"principal_type": "user", "principal_id": user_id, "permission": permission}
                for user_id in user_ids
                for permission in ("read", "write")
            ],
            "share_mode": "continue" if user_ids else None,
        },
    )


def test_a_continue_mode_share_in_the_owner_s_private_folder_gives_no_project_memory(
    stack: Stack,
):
    alice, bob = stack.client("a"), stack.client("b")
    folder = alice.call("POST", "/api/v1/folders/", json={"name": "Greenhouse (private)"})
    stack.add_memory(stack.users["a"].id, PRIVATE_PROJECT, bank="project", folder_id=folder["id"])
    thread = alice.new_thread(folder_id=folder["id"])
    alice.call("POST", f"/api/v1/chats/{thread.chat_id}/share", json={"share_mode": "continue"})
    alice.call(
        "POST",
        f"/api/v1/chats/shared/{thread.chat_id}/access/update",
        json={
            "access_grants": [
                {
                    "principal_type": "user",
                    "principal_id": stack.users["b"].id,
                    "permission": "read",
                }
            ],
            "share_mode": "continue",
        },
    )

    seen = {"alice, owner": _ask(stack, alice, thread), "bob": _ask(stack, bob, thread)}

    assert {who: PRIVATE_PROJECT in all_text(r) for who, r in seen.items()} == {
        "alice, owner": True,
        "bob": False,
    }


def test_a_revoked_grant_ends_project_memory_for_the_user_s_own_chat_in_the_folder(
    stack: Stack,
):
    alice, bob = stack.client("a"), stack.client("b")
    folder = alice.call("POST", "/api/v1/folders/", json={"name": "Greenhouse (shared)"})
    stack.add_memory(stack.users["a"].id, SHARED_PROJECT, bank="project", folder_id=folder["id"])
    _grant(alice, folder["id"], [stack.users["b"].id])
    bobs_chat = bob.new_thread(folder_id=folder["id"])
    while_member = _ask(stack, bob, bobs_chat)

    _grant(alice, folder["id"], [])
    after_revocation = _ask(stack, bob, bobs_chat)
    owner_after = _ask(stack, alice, alice.new_thread(folder_id=folder["id"]))

    assert bob.read_chat(bobs_chat.chat_id)["folder_id"] == folder["id"]
    assert [SHARED_PROJECT in all_text(r) for r in (while_member, after_revocation)] == [
        True,
        False,
    ]
    assert SHARED_PROJECT in all_text(owner_after)
