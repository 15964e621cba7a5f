"""Open WebUI's built-in memories brought over by the user with `/memory import openwebui`, in a
real Open WebUI 0.12.4 (the filter reads them in-process)."""

from __future__ import annotations

import re

import pytest

from service.core import person
from testkit.openwebui_stack import Stack

pytestmark = pytest.mark.e2e

OWUI_FACTS = ["I grow chillies on my balcony", "My cat is called Miso"]


def _personal(stack: Stack, user_id: str) -> list[dict[str, object]]:
    export = stack.service.get(f"/v1/users/{user_id}/memories/export").json()
    return [m for m in export if "import:openwebui" in m["tags"]]


def test_a_users_open_webui_memories_are_imported_once_with_their_dates(stack: Stack) -> None:
    b = stack.users["b"]
    stack.forget_memories(b.id)
    bob = stack.client("b")
    created = [
        bob.call("POST", "/api/v1/memories/add", json={"content": fact}) for fact in OWUI_FACTS
    ]
    thread = bob.new_thread()

    preview = bob.send(thread, "/memory import openwebui")

    # shown first and written only with the code, like pasted text (issue 30 item 7)
    assert preview.reply.startswith("**I would add 2 memories from Open WebUI**:\n\n- "), (
        preview.reply
    )
    assert _personal(stack, b.id) == []
    code = re.search(r"`/memory import confirm ([0-9a-f]{6})`", preview.reply)
    assert code is not None, preview.reply
    first = bob.send(thread, f"/memory import confirm {code.group(1)}")
    assert first.reply.startswith("**Imported 2 memories**:\n\n- `"), first.reply
    imported = sorted(_personal(stack, b.id), key=lambda m: str(m["content"]))
    # stored in the third person, as `/memory add` stores a first-person text (core/person.py)
    by_content = {person.third_person(str(m["content"])): m for m in created}
    assert [(m["content"], m["bank"]) for m in imported] == [
        ("User grows chillies on their balcony", "personal"),
        ("User's cat is called Miso", "personal"),
    ]
    for memory in imported:
        original = by_content[memory["content"]]
        assert memory["created_at"][:19] == _iso(original["created_at"])
    second = bob.send(thread, "/memory import openwebui")
    assert second.reply == "Nothing new to import from Open WebUI (2 already known)."
    assert len(_personal(stack, b.id)) == 2


def _iso(epoch: object) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(float(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%S")  # type: ignore[arg-type]


def test_the_cli_reads_the_signed_in_accounts_memories_over_rest(stack: Stack) -> None:
    """The Open WebUI half of `python -m service openwebui import-memories` (the writing half
    is the import the test above runs through the filter)."""
    from service.cli.openwebui_memories import read_account_memories

    a = stack.users["a"]
    alice = stack.client("a")
    made = alice.call("POST", "/api/v1/memories/add", json={"content": "I sing in a choir"})
    try:
        user_id, rows = read_account_memories(
            stack.base_url, token=None, email=a.email, password=a.password
        )
        _, admins = read_account_memories(
            stack.base_url, token=stack.admin.token, email=None, password=None
        )
    finally:  # Alice's native memories are other tests' fixture: leave them as they were
        alice.call("DELETE", f"/api/v1/memories/{made['id']}")
    assert user_id == a.id
    assert ("I sing in a choir", _iso(made["created_at"])) in [
        (content, created.strftime("%Y-%m-%dT%H:%M:%S")) for content, created, _ in rows
    ]
    # the admin's session reads the admin's own memories only, never Alice's
    assert "I sing in a choir" not in [content for content, _, _ in admins]
