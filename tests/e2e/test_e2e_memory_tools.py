"""The Memory Tools in a real Open WebUI 0.12.4: a stand-in model that calls tools (native
function calling) searches, adds and forgets the user's memories, with the chat's rules.

The stand-in answers a turn whose last user message starts with `Remember:`, `Search:` or
`Forget:` with a call of memory_add, memory_search or memory_forget (when Open WebUI offered
that tool), and the next request, which carries the tool's result, with `TOOL-SAID <result>`:
so the reply shows exactly what the model read.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.llm_stub import DEFAULT_REPLY, MODEL_ID, StubReply
from testkit.openwebui import ARTIFACTS, REPO, OpenWebUIClient, Thread, status_lines
from testkit.openwebui_stack import Stack
from testkit.waiting import wait_until
from tests.e2e.test_e2e_commands import _run_browser

pytestmark = pytest.mark.e2e

TOOLS_ID = "memory_tools"
CALLS = {"Remember:": ("memory_add", "content"), "Search:": ("memory_search", "query")}
CALLS["Forget:"] = ("memory_forget", "memory_id")
PERSONAL = "User keeps two beehives on the roof"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def tool_caller(request: dict[str, Any]) -> str | StubReply:
    """A model that calls the memory tool its user's message names (see the module doc)."""
    messages = request.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return "TOOL-SAID " + _text(messages[-1].get("content"))
    offered = {t.get("function", {}).get("name") for t in request.get("tools") or []}
    said = next(
        (_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
    )
    for prefix, (name, argument) in CALLS.items():
        if said.startswith(prefix) and name in offered:
            return StubReply(tool_calls=[(name, {argument: said.removeprefix(prefix).strip()})])
    return DEFAULT_REPLY


@pytest.fixture(scope="module")
def tools_model(stack: Stack) -> Iterator[None]:
    """The stand-in calls tools; stub-model offers the Memory Tools (installer
    `--tools-model`); both are undone afterwards."""
    offered = stack.run_installer("--tools-model", MODEL_ID)
    assert offered.returncode == 0, offered.stderr + offered.stdout
    assert f"model {MODEL_ID}: memory tools offered" in offered.stdout.splitlines()
    stack.be_patient_with_the_service()
    responder = stack.model_stub.responder
    stack.model_stub.responder = tool_caller
    yield
    stack.model_stub.responder = responder
    admin = stack.client("admin")
    row = next(m for m in admin.call("GET", "/api/v1/models/all") if m["id"] == MODEL_ID)
    meta = {**row["meta"], "toolIds": [t for t in row["meta"].get("toolIds", []) if t != TOOLS_ID]}
    admin.call(
        "POST",
        "/api/v1/models/model/update",
        json={
            "id": MODEL_ID,
            "name": row["name"],
            "base_model_id": None,
            "params": row["params"],
            "meta": meta,
        },
    )


def _turn(client: OpenWebUIClient, thread: Thread, text: str) -> tuple[str, list[str]]:
    """One streamed turn with the Memory Tools switched on, as the chat input sends it when
    the model offers them (`tool_ids`); (the reply from `TOOL-SAID` on, its status lines).

    The stored reply may start with Open WebUI's own account of the tool call."""
    turn = client.send(thread, text, stream=True, extra={"tool_ids": [TOOLS_ID]})
    said = turn.reply[turn.reply.rfind("TOOL-SAID") :] if "TOOL-SAID" in turn.reply else turn.reply
    return said.strip(), status_lines(turn.stored)


def _memories(stack: Stack, user_id: str) -> list[tuple[str, str]]:
    page = stack.service.get(f"/v1/users/{user_id}/memories", params={"limit": 200}).json()
    return sorted((m["bank"], m["content"]) for m in page["items"])


@pytest.mark.usefixtures("tools_model")
def test_a_model_remembers_finds_and_forgets_through_the_tools(stack: Stack) -> None:
    alice, bob = stack.client("a"), stack.client("b")
    for who in ("a", "b"):
        stack.forget_memories(stack.users[who].id)
    thread = alice.new_thread("memory tools")

    added, added_lines = _turn(alice, thread, "Remember: I keep two beehives on the roof")
    found, found_lines = _turn(alice, thread, "Search: beehives")
    short = found.split("\n- ", 1)[1].split(" · ", 1)[0]
    by_bob, _ = _turn(bob, bob.new_thread("bob"), f"Forget: {short}")
    still = _memories(stack, stack.users["a"].id)
    forgot, forgot_lines = _turn(alice, thread, f"Forget: {short}")

    assert added == f"TOOL-SAID Remembered in Personal as {short}: {PERSONAL}"
    assert f"Remembered: {PERSONAL}" in added_lines
    assert found.startswith("TOOL-SAID 1 memory found (id · bank · date · text):\n- ")
    assert "Searched memories: 1 found" in found_lines
    assert by_bob.startswith(f"TOOL-SAID No memory {short} can be forgotten in this chat")
    assert still == [("personal", PERSONAL)]
    assert forgot == f"TOOL-SAID Forgot {short}: {PERSONAL}"
    assert f"Forgot: {PERSONAL}" in forgot_lines
    assert _memories(stack, stack.users["a"].id) == []


@pytest.mark.usefixtures("tools_model")
def test_a_shared_folder_chat_never_shows_nor_writes_personal_memory(stack: Stack) -> None:
    a, b = stack.users["a"], stack.users["b"]
    stack.forget_memories(a.id)
    stack.add_memory(a.id, PERSONAL)
    alice = stack.client("a")
    folder = alice.call("POST", "/api/v1/folders/", json={"name": f"Hives {uuid.uuid4().hex[:6]}"})
    alice.call(
        "POST",
        f"/api/v1/folders/{folder['id']}/access/update",
        json={
            "access_grants": [
                {"principal_type": "user", "principal_id": b.id, "permission": p}
                for p in ("read", "write")
            ],
            "share_mode": "continue",
        },
    )
    thread = alice.new_thread("shared hives", folder_id=folder["id"])

    found, _ = _turn(alice, thread, "Search: beehives")
    personal, _ = _turn(alice, thread, "Remember: I am afraid of wasps")

    assert found == (
        "TOOL-SAID No memory matches “beehives”. Personal memories are never available in a "
        "shared chat."
    )
    assert personal.startswith("TOOL-SAID Remembered in Interaction Patterns as ")
    assert _memories(stack, a.id) == [
        ("interaction_patterns", "User is afraid of wasps"),
        ("personal", PERSONAL),
    ]


@pytest.mark.usefixtures("tools_model")
def test_a_temporary_chat_stores_nothing_through_the_tools(stack: Stack) -> None:
    a = stack.users["a"]
    stack.forget_memories(a.id)
    alice = stack.client("a")
    mark = stack.model_log.mark()
    text = "Remember: I keep two beehives on the roof"

    alice.call(
        "POST",
        "/api/chat/completions",
        json={
            "model": MODEL_ID,
            "stream": True,
            "chat_id": f"local:{uuid.uuid4()}",
            "id": str(uuid.uuid4()),
            "tool_ids": [TOOLS_ID],
            "messages": [{"role": "user", "content": text}],
            "user_message": {
                "id": str(uuid.uuid4()),
                "role": "user",
                "content": text,
                "parentId": None,
                "models": [MODEL_ID],
            },
        },
    )

    def tool_results() -> list[dict[str, Any]] | None:
        seen = list(stack.model_log.iter_chat(mark))
        found = [m for r in seen for m in r["messages"] if m.get("role") == "tool"]
        return found or None

    results = wait_until(tool_results, timeout_s=30, what="the tool's result to reach the model")
    assert [_text(m["content"]) for m in results] == [
        "Not remembered: nothing is stored from a temporary chat."
    ]
    assert _memories(stack, a.id) == []


@pytest.mark.usefixtures("tools_model")
def test_a_model_offering_the_tools_uses_them_from_the_browser(stack: Stack) -> None:
    # The admin's `--tools-model` put the tool in the model's tools; the chat input starts
    # with it switched on, so the browser sends it with the first message.
    a = stack.users["a"]
    stack.forget_memories(a.id)
    mark = stack.model_log.mark()

    report = _run_browser(
        stack,
        a.email,
        [
            {
                "text": "Remember: I keep two beehives on the roof",
                "expect_lines": ["TOOL-SAID Remembered in Personal as"],
            }
        ],
        str(ARTIFACTS / "memory-tools.png"),
    )

    (reply,) = report["replies"]
    stored = stack.client("a").read_chat(report["chat_id"])["chat"]["history"]["messages"]
    first = next(stack.model_log.iter_chat(mark))
    assert "memory_add" in {t["function"]["name"] for t in first.get("tools") or []}
    assert f"Remembered: {PERSONAL}" in status_lines(stored[reply["id"]])
    assert _memories(stack, a.id) == [("personal", PERSONAL)]
    if os.environ.get("E2E_UPDATE_README_SCREENSHOT"):  # ids and dates differ on every run
        shutil.copyfile(ARTIFACTS / "memory-tools.png", REPO / "docs" / "img" / "memory-tools.png")
