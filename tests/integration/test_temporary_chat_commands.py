"""In a temporary chat every /memory management command works; only learning never does.

Issue 14 item 6: `forget` and `forget all` were carried out there while `add` and `edit`
were refused. A command is the user's explicit request, so all of them now work as in a
private chat; what a temporary chat never does is learn by itself from the conversation
(tests/integration/test_privacy_matrix.py, WRITES).
"""

from __future__ import annotations

import re
from typing import Any

from testkit.live_service import LiveService

TEMPORARY = {"user_id": "tia", "chat_id": "temporary:sid-7", "kind": "temporary"}


def _command(live: LiveService, command: str, chat: dict[str, Any] = TEMPORARY) -> str:
    answer = live.client.post("/v1/commands", json={"chat": chat, "command": command})
    assert answer.status_code == 200, answer.text
    text: str = answer.json()["text"]
    return text


def _contents(live: LiveService) -> list[tuple[str, str]]:
    items = live.client.get("/v1/users/tia/memories").json()["items"]
    return sorted((m["bank"], m["content"]) for m in items)


def _id_in(text: str) -> str:
    found = re.search(r"`([0-9a-z]{6})`", text)
    assert found, text
    return found.group(1)


def test_add_edit_assign_and_forget_all_work_in_a_temporary_chat(service: LiveService):
    added = _command(service, "/memory add I keep two beehives")
    memory_id = _id_in(added)
    edited = _command(service, f"/memory edit {memory_id} I keep three beehives")
    moved = _command(service, f"/memory assign_bank {memory_id} interaction_patterns")
    after_edits = _contents(service)
    other = _id_in(_command(service, "/memory add personal: My sister is called Jane"))
    forgotten = _command(service, f"/memory forget {other}")

    assert added.startswith("Remembered in Personal:")
    assert edited.startswith("Changed:")
    assert moved.startswith("Moved to Interaction Patterns:")
    assert after_edits == [("interaction_patterns", "User keeps three beehives")]
    assert forgotten.startswith("Forgotten ")
    assert _contents(service) == [("interaction_patterns", "User keeps three beehives")]

    asked = _command(service, "/memory forget all")
    code = re.search(r"/memory forget all ([0-9a-f]{6})", asked)
    assert code, asked
    done = _command(service, f"/memory forget all {code.group(1)}")

    assert _contents(service) == []
    assert done == "Forgot 1 memory. Project memories of shared folders were kept."


def test_the_banks_of_a_temporary_chat_say_commands_change_them_and_nothing_is_learned(
    service: LiveService,
):
    banks = _command(service, "/memory banks")

    assert "- **Personal**: 0 memories — read, changed by your commands only" in banks
    assert "- **Chat Memory**: 0 memories — hidden here, no writing here" in banks
