"""Assistant Memory through a real Open WebUI 0.12.4 (issue #18 item 5, DESIGN §3).

Two workspace models over the stand-in `stub-model`: "Coding Helper" is given its own memory
by the installer CLI (`openwebui assistant-memory`, which tags it `own-memory`), "Story Coach"
by the filter's `assistant_memory_models` valve. Alice tells Coding Helper a fact in a chat;
extraction stores it in her memory for Coding Helper only, and it reaches the model in Coding
Helper's chats and nowhere else — not in an ordinary chat, not in Story Coach's — while her
Personal memory reaches only the ordinary chat. `/memory list` in Coding Helper's chat shows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testkit.extraction_replies import by_message, new_op
from testkit.llm_stub import MODEL_ID
from testkit.openwebui import system_text
from testkit.openwebui_stack import Stack
from testkit.waiting import wait_until

pytestmark = pytest.mark.e2e

CODER, WRITER = "e2e-coder", "e2e-writer"
TOLD = "Please remember that I write all my services in Rust."  # due at once (batching)
FACT = "User writes all their services in Rust"
PERSONAL = "User keeps two beehives"
EVERYONE_READS = {"principal_type": "user", "principal_id": "*", "permission": "read"}


def _workspace_model(stack: Stack, model_id: str, name: str) -> None:
    admin = stack.client("admin")
    rows = {m["id"] for m in admin.call("GET", "/api/v1/models/all") or []}
    if model_id not in rows:
        admin.call(
            "POST",
            "/api/v1/models/create",
            json={
                "id": model_id,
                "base_model_id": MODEL_ID,
                "name": name,
                "meta": {"description": f"{name} for the e2e suite", "tags": []},
                "params": {},
                "is_active": True,
                "access_grants": [EVERYONE_READS],
            },
        )
    admin.call("GET", "/api/models", params={"refresh": "true"})


@pytest.fixture(scope="module")
def assistants(stack: Stack) -> Iterator[None]:
    """Both assistants exist and are marked; the valve and the extraction stub are restored
    afterwards, so the rest of the session sees ordinary models."""
    _workspace_model(stack, CODER, "Coding Helper")
    _workspace_model(stack, WRITER, "Story Coach")
    marked = stack.run_installer(CODER, command="assistant-memory")
    assert marked.returncode == 0, marked.stderr
    assert marked.stdout.startswith("Coding Helper (e2e-coder) now keeps its own memory")
    admin = stack.client("admin")
    valves = admin.call("GET", "/api/v1/functions/id/memory_filter/valves") or {}
    admin.call(
        "POST",
        "/api/v1/functions/id/memory_filter/valves/update",
        json={**valves, "assistant_memory_models": WRITER},
    )
    responder = stack.extraction_stub.responder
    stack.extraction_stub.responder = by_message({"Rust": [new_op(FACT, bank="personal")]})
    yield
    stack.extraction_stub.responder = responder
    admin.call("POST", "/api/v1/functions/id/memory_filter/valves/update", json=valves)
    unmarked = stack.run_installer(CODER, "--off", command="assistant-memory")
    assert unmarked.returncode == 0, unmarked.stderr


def _coder_memories(stack: Stack, user_id: str) -> list[dict[str, Any]]:
    page = stack.service.get(
        f"/v1/users/{user_id}/memories", params={"assistant_id": CODER, "bank": "assistant"}
    ).json()
    return [m for m in page["items"] if m["bank"] == "assistant"]


def _system_of_next_turn(stack: Stack, model: str, text: str) -> str:
    alice = stack.client("a")
    thread = alice.new_thread(f"e2e {model}")
    mark = stack.model_log.mark()
    alice.send(thread, text, model=model)
    seen = list(stack.model_log.iter_chat(mark))
    assert len(seen) == 1, [r.get("messages") for r in seen]
    return system_text(seen[0])


def test_a_fact_told_to_an_assistant_reaches_only_that_assistants_chats(
    stack: Stack, assistants: None
) -> None:
    a = stack.users["a"]
    stack.forget_memories(a.id)
    stack.add_memory(a.id, PERSONAL)
    alice = stack.client("a")

    told = alice.new_thread("telling the coder")
    alice.send(told, TOLD, model=CODER)
    stored = wait_until(
        lambda: _coder_memories(stack, a.id), what="the fact in Coding Helper's memory"
    )
    assert [(m["content"], m["owner_kind"], m["assistant_id"]) for m in stored] == [
        (FACT, "assistant", CODER)
    ]
    # nothing of it went to her own banks
    own = stack.service.get(f"/v1/users/{a.id}/memories").json()["items"]
    assert [m["content"] for m in own] == [PERSONAL]

    coder = _system_of_next_turn(stack, CODER, "Which language do I write my services in?")
    assert FACT in coder and PERSONAL not in coder
    ordinary = _system_of_next_turn(stack, MODEL_ID, "Which language do I write services in?")
    assert PERSONAL in ordinary and FACT not in ordinary
    writer = _system_of_next_turn(stack, WRITER, "Which language do I write my services in?")
    assert FACT not in writer and PERSONAL not in writer

    # /memory list in Coding Helper's chat shows it, named after the assistant
    listing = alice.send(alice.new_thread("list"), "/memory list", model=CODER).reply
    assert listing.startswith("**Assistant Memory of Coding Helper** (1):")
    assert "User writes all their services in Rust" in listing.replace("\\", "")
    assert "beehives" not in listing
    ordinary_listing = alice.send(alice.new_thread("list"), "/memory list").reply
    assert "beehives" in ordinary_listing and "Rust" not in ordinary_listing
    stack.forget_memories(a.id)
    for memory in _coder_memories(stack, a.id):
        stack.service.delete(
            f"/v1/users/{a.id}/memories/{memory['id']}", params={"assistant_id": CODER}
        )
