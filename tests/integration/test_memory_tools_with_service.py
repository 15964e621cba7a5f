"""The Memory Tools file (filter/memory_tools.py) against the real service over HTTP: what a
tool-calling model can find, store and forget in each kind of chat (issue 30)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from testkit.filter_loader import load_filter
from testkit.live_service import LiveService
from tests.support.emitter import EventRecorder
from tests.support.open_webui_fake import FakeOpenWebUI

TOOLS_PATH = load_filter.__globals__["FILTER_PATH"].parent / "memory_tools.py"
ADA = {"id": "u1", "name": "Ada", "role": "user"}
BOB = {"id": "u2", "name": "Bob", "role": "user"}
MODEL = {"id": "stub-model", "name": "Stub", "info": {"meta": {}}}


def _tools(live: LiveService) -> Any:
    tools = load_filter(TOOLS_PATH).Tools()
    tools.valves = tools.Valves(service_url=live.base_url, api_key=live.api_key, timeout_s=30)
    return tools


async def _run(
    tools: Any,
    method: str,
    *,
    user: dict[str, Any] = ADA,
    chat_id: str = "c1",
    model: dict[str, Any] = MODEL,
    **arguments: Any,
) -> tuple[str, str]:
    """(what the model reads, the status line the user sees)."""
    events = EventRecorder()
    answer = await getattr(tools, method)(
        **arguments,
        __user__=user,
        __metadata__={
            "chat_id": chat_id,
            "session_id": "sid",
            "model_id": model["id"],
            "model": model,
        },
        __chat_id__=chat_id,
        __event_emitter__=events,
    )
    assert [e["type"] for e in events.events] == ["status"]
    return answer, str(events.events[0]["data"]["description"])


async def _rows(conn: psycopg.AsyncConnection) -> list[tuple[str, str, str, str]]:
    cursor = await conn.execute("SELECT owner_id, bank, content, status FROM memories ORDER BY seq")
    return [tuple(map(str, r)) for r in await cursor.fetchall()]  # type: ignore[misc]


@pytest.fixture
def owui(monkeypatch: pytest.MonkeyPatch) -> FakeOpenWebUI:
    """c1: Ada's private chat; c2: Ada's chat shared to continue; c3: Ada's chat with Bob in
    it (Bob posts there)."""
    fake = FakeOpenWebUI(
        chats={
            "c1": {"user_id": "u1", "folder_id": None},
            "c2": {"user_id": "u1", "folder_id": None},
            "c3": {"user_id": "u1", "folder_id": None},
            "b1": {"user_id": "u2", "folder_id": None},
        },
        shares={"c2": "continue"},
    )
    fake.install(monkeypatch)
    return fake


async def test_a_model_remembers_finds_and_forgets_in_a_private_chat(
    service: LiveService, db_conn: psycopg.AsyncConnection, owui: FakeOpenWebUI
) -> None:
    tools = _tools(service)

    added = await _run(tools, "memory_add", content="I am allergic to peanuts")
    again = await _run(tools, "memory_add", content="User is allergic to peanuts.")
    found, searched = await _run(tools, "memory_search", query="food allergies")
    short = found.splitlines()[1].split(" · ")[0].removeprefix("- ")
    forgot = await _run(tools, "memory_forget", memory_id=short)

    assert added == (
        f"Remembered in Personal as {short}: User is allergic to peanuts",
        "Remembered: User is allergic to peanuts",
    )
    assert again == (
        f"Already remembered as {short}: User is allergic to peanuts",
        "Already remembered: User is allergic to peanuts",
    )
    assert found.startswith("1 memory found (id · bank · date · text):\n")
    assert searched == "Searched memories: 1 found"
    assert forgot == (
        f"Forgot {short}: User is allergic to peanuts",
        "Forgot: User is allergic to peanuts",
    )
    assert [r[3] for r in await _rows(db_conn)] == ["deleted"]


async def test_a_shared_chat_never_sees_nor_writes_personal_memory(
    service: LiveService, db_conn: psycopg.AsyncConnection, owui: FakeOpenWebUI
) -> None:
    tools = _tools(service)
    await _run(tools, "memory_add", content="User is allergic to peanuts")
    private, _ = await _run(tools, "memory_search", query="peanuts")
    short = private.splitlines()[1].split(" · ")[0].removeprefix("- ")

    shared, line = await _run(tools, "memory_search", chat_id="c2", query="peanuts")
    forget, _ = await _run(tools, "memory_forget", chat_id="c2", memory_id=short)
    personal, _ = await _run(
        tools, "memory_add", chat_id="c2", content="User has a cat", bank="personal"
    )
    default, _ = await _run(tools, "memory_add", chat_id="c2", content="User wants short answers")
    as_bob, _ = await _run(tools, "memory_search", user=BOB, chat_id="c3", query="peanuts")

    assert shared == (
        "No memory matches “peanuts”. Personal memories are never available in a shared chat."
    )
    assert line == "Searched memories: none found"
    assert forget.startswith(f"No memory {short} can be forgotten in this chat")
    assert personal.startswith("Not remembered: Personal memory is never written in a shared chat")
    assert default.startswith("Remembered in Interaction Patterns as ")
    assert as_bob.startswith("No memory matches")
    assert await _rows(db_conn) == [
        ("u1", "personal", "User is allergic to peanuts", "active"),
        ("u1", "interaction_patterns", "User wants short answers", "active"),
    ]


async def test_another_user_cannot_forget_by_id(
    service: LiveService, db_conn: psycopg.AsyncConnection, owui: FakeOpenWebUI
) -> None:
    tools = _tools(service)
    added, _ = await _run(tools, "memory_add", content="User is allergic to peanuts")
    short = added.split(" as ")[1].split(":")[0]

    answer, line = await _run(tools, "memory_forget", user=BOB, chat_id="b1", memory_id=short)

    assert answer.startswith(f"No memory {short} can be forgotten in this chat")
    assert line == answer
    assert [r[3] for r in await _rows(db_conn)] == ["active"]


async def test_a_temporary_chat_reads_but_writes_nothing(
    service: LiveService, db_conn: psycopg.AsyncConnection, owui: FakeOpenWebUI
) -> None:
    tools = _tools(service)
    added, _ = await _run(tools, "memory_add", content="User is allergic to peanuts")
    short = added.split(" as ")[1].split(":")[0]

    found, _ = await _run(tools, "memory_search", chat_id="local:t1", query="peanuts")
    stored, line = await _run(tools, "memory_add", chat_id="local:t1", content="User has a cat")
    forget, _ = await _run(tools, "memory_forget", chat_id="local:t1", memory_id=short)

    assert found.startswith("1 memory found")
    assert (stored, line) == (
        "Not remembered: nothing is stored from a temporary chat.",
        "Not remembered: nothing is stored from a temporary chat.",
    )
    assert forget.startswith("Not forgotten: memories are not changed from a temporary chat")
    assert await _rows(db_conn) == [("u1", "personal", "User is allergic to peanuts", "active")]


async def test_an_assistants_chat_keeps_to_that_assistants_memory(
    service: LiveService, db_conn: psycopg.AsyncConnection, owui: FakeOpenWebUI
) -> None:
    tools = _tools(service)
    coach = {"id": "coach", "name": "Coach", "info": {"meta": {"tags": [{"name": "own-memory"}]}}}
    await _run(tools, "memory_add", content="User is allergic to peanuts")

    stored, _ = await _run(tools, "memory_add", model=coach, content="User runs 5 km on Sundays")
    found, _ = await _run(tools, "memory_search", model=coach, query="peanuts")

    assert stored.startswith("Remembered in Assistant Memory as ")
    assert "allergic" not in found
    rows = await _rows(db_conn)
    assert [(r[1], r[2]) for r in rows] == [
        ("personal", "User is allergic to peanuts"),
        ("assistant", "User runs 5 km on Sundays"),
    ]


async def test_a_background_task_gets_nothing(
    service: LiveService, db_conn: psycopg.AsyncConnection, owui: FakeOpenWebUI
) -> None:
    tools = _tools(service)
    await _run(tools, "memory_add", content="User is allergic to peanuts")
    events = EventRecorder()

    answer = await tools.memory_search(
        query="peanuts",
        __user__=ADA,
        __metadata__={"chat_id": "c1", "task": "title_generation", "model": MODEL},
        __chat_id__="c1",
        __event_emitter__=events,
    )

    assert answer == "Memory is not available here (memory works in chats only)."
