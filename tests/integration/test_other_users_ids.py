"""Every route that takes a chat, message, memory or reminder id, called for another user
with ids of u1's (issue 27, item 4): nothing of u1's is read, changed or written.

The chat routes get a defence in depth of their own (service/flows/chat_owner.py): c1 was
handed over as u1's private chat, so a request naming c1 for u2 — forged, or from an Open
WebUI that returns a chat to any caller — answers 403 with a sentence. Before, each of them
answered 200: u2's inlet read c1's Chat Memory, and u2's Remember click or `/memory add
chat:` wrote into it, which u1's inlet then injected. Memory and reminder ids were already
scoped to the user in the path (404).

Folder ids the same way: f1 was handed over as u1's private folder, so u2 naming it — in
the chat of a request, or as the `folder_id` of a memory route or of an export's Project
memory — answers 403. Before, each of them answered 200 (u2 listed, searched, exported,
edited and forgot f1's Project Memory, and wrote into it). The memory tools and the Open
WebUI import had no chat check at all. Short memory ids and import confirmation codes of
u1's, typed by u2 in u2's own chat, find nothing.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from sqlalchemy import select
from sqlalchemy.dialects import postgresql

from service.storage import turns
from service.storage.tables import TurnRow
from testkit.live_service import LiveService

U1_CHAT = {"user_id": "u1", "chat_id": "c1", "kind": "saved"}
U1_IN_F1 = {"user_id": "u1", "chat_id": "c3", "kind": "saved", "folder_id": "f1"}
U2_IN_C1 = {"user_id": "u2", "chat_id": "c1", "kind": "saved"}
U2_IN_C1_SHARED = {**U2_IN_C1, "collaborative": True, "collaborative_reason": "sender_not_owner"}
U2_OWN = {"user_id": "u2", "chat_id": "c2", "kind": "saved"}
U2_IN_F1 = {**U2_OWN, "folder_id": "f1"}
U2_IN_F1_SHARED = {**U2_IN_F1, "collaborative": True, "collaborative_reason": "folder_shared"}
SHORT_ID = re.compile(r"^- `([a-z0-9]+)`", re.MULTILINE)
CODE = re.compile(r"`/memory import confirm (\S+)`")


@pytest.fixture
def u1(service: LiveService) -> dict[str, str]:
    """u1's private chat c1 (one turn), a Personal memory, c1's Chat Memory, a reminder."""
    client = service.client
    turn = {"chat": U1_CHAT, "user_message_id": "t1", "user_message": "I keep bees"}
    assert client.post("/v1/turns", json=turn).status_code == 202
    personal = client.post("/v1/users/u1/memories", json={"content": "User keeps bees"})
    added = client.post(
        "/v1/commands", json={"chat": U1_CHAT, "command": "/memory add chat: The hive is blue"}
    )
    assert added.status_code == 200, added.text
    reminder = client.post(
        "/v1/users/u1/reminders", json={"content": "check the hive", "cue": "bees"}
    )
    assert reminder.status_code == 201, reminder.text
    # u1's private folder f1: a turn from a chat in it, and its Project Memory
    turn = {"chat": U1_IN_F1, "user_message_id": "t2", "user_message": "the apiary is done"}
    assert client.post("/v1/turns", json=turn).status_code == 202
    project = client.post(
        "/v1/users/u1/memories",
        json={"content": "The apiary opens in May", "bank": "project", "folder_id": "f1"},
    )
    assert project.status_code == 201, project.text
    listed = client.post("/v1/commands", json={"chat": U1_CHAT, "command": "/memory list"})
    short_id = SHORT_ID.search(listed.json()["text"])
    preview = client.post(
        "/v1/commands", json={"chat": U1_CHAT, "command": "/memory import User keeps wasps"}
    )
    code = CODE.search(preview.json()["text"])
    assert short_id and code, (listed.text, preview.text)
    return {
        "memory": personal.json()["id"],
        "reminder": reminder.json()["id"],
        "project": project.json()["id"],
        "short_id": short_id.group(1),
        "code": code.group(1),
    }


def _routes(ids: dict[str, str]) -> list[tuple[str, str, dict[str, Any] | None, int]]:
    """(method, path, body, the answer for u2) of every id-bearing route."""
    memory, reminder, project = ids["memory"], ids["reminder"], ids["project"]
    short, code = ids["short_id"], ids["code"]
    owui = {"id": "ow1", "content": "User keeps wasps", "created_at": 1_700_000_000}
    closed = {"content": "The apiary is closed"}
    exported = {"content": "The apiary is closed", "bank": "project", "folder_id": "f1"}
    remember = {"message_id": "t1", "role": "user", "content": "The hive is red", "author_id": "u2"}
    return [
        ("POST", "/v1/context", {"chat": U2_IN_C1, "message": "what colour is the hive?"}, 403),
        ("POST", "/v1/context", {"chat": U2_IN_C1_SHARED, "message": "the hive?"}, 403),
        (
            "POST",
            "/v1/turns",
            {"chat": U2_IN_C1, "user_message_id": "t9", "user_message": "hi"},
            403,
        ),
        ("POST", "/v1/commands", {"chat": U2_IN_C1, "command": "/memory list"}, 403),
        ("POST", "/v1/commands", {"chat": U2_IN_C1, "command": "/memory add chat: red"}, 403),
        (
            "POST",
            "/v1/commands",
            {"chat": U2_IN_C1_SHARED, "command": "/memory add chat: red"},
            403,
        ),
        ("POST", "/v1/memories/remember", {"chat": U2_IN_C1, **remember}, 403),
        ("POST", "/v1/memories/remember", {"chat": U2_IN_C1_SHARED, **remember}, 403),
        ("GET", f"/v1/users/u2/memories/{memory}", None, 404),
        ("PATCH", f"/v1/users/u2/memories/{memory}", {"content": "User keeps wasps"}, 404),
        ("DELETE", f"/v1/users/u2/memories/{memory}", None, 404),
        ("GET", f"/v1/users/u2/reminders/{reminder}", None, 404),
        ("DELETE", f"/v1/users/u2/reminders/{reminder}", None, 404),
        # the memory tools and the Open WebUI import, in u1's private chat
        ("POST", "/v1/tools/search", {"chat": U2_IN_C1, "query": "hive"}, 403),
        ("POST", "/v1/tools/add", {"chat": U2_IN_C1, "content": "The hive is red"}, 403),
        ("POST", "/v1/tools/forget", {"chat": U2_IN_C1, "memory_id": ids["short_id"]}, 403),
        ("POST", "/v1/imports/openwebui", {"chat": U2_IN_C1, "memories": [owui]}, 403),
        # u1's private folder, named by u2's own chat (private or shared)
        *[
            (method, path, {**body, "chat": chat}, 403)
            for chat in (U2_IN_F1, U2_IN_F1_SHARED)
            for method, path, body in (
                ("POST", "/v1/context", {"message": "when does the apiary open?"}),
                ("POST", "/v1/turns", {"user_message_id": "t8", "user_message": "hi"}),
                ("POST", "/v1/commands", {"command": "/memory list"}),
                ("POST", "/v1/commands", {"command": "/memory add project: closed"}),
                ("POST", "/v1/memories/remember", remember),
                ("POST", "/v1/tools/search", {"query": "apiary"}),
                ("POST", "/v1/tools/add", {"content": "The apiary is closed", "bank": "project"}),
                ("POST", "/v1/imports/openwebui", {"memories": [owui]}),
            )
        ],
        # u1's private folder as the folder_id of the memory routes
        ("GET", "/v1/users/u2/memories?folder_id=f1", None, 403),
        ("GET", "/v1/users/u2/memories/search?q=apiary&folder_id=f1", None, 403),
        ("GET", "/v1/users/u2/memories/export?folder_id=f1", None, 403),
        ("POST", "/v1/users/u2/memories", {**closed, "bank": "project", "folder_id": "f1"}, 403),
        ("GET", f"/v1/users/u2/memories/{project}?folder_id=f1", None, 403),
        ("PATCH", f"/v1/users/u2/memories/{project}?folder_id=f1", closed, 403),
        ("DELETE", f"/v1/users/u2/memories/{project}?folder_id=f1", None, 403),
        ("POST", "/v1/users/u2/memories/import", [exported], 403),
        ("POST", "/v1/users/u2/memories/import", {"memories": [exported]}, 403),
        # u1's short memory id and import code, typed by u2 in u2's own chat: nothing found
        *[
            ("POST", "/v1/commands", {"chat": U2_OWN, "command": command}, 200)
            for command in (
                f"/memory forget {short}",
                f"/memory edit {short} x",
                f"/memory assign_bank {short} project",
                f"/memory import confirm {code}",
            )
        ],
        ("POST", "/v1/tools/forget", {"chat": U2_OWN, "memory_id": short}, 200),
    ]


async def test_another_users_ids_reach_nothing_of_theirs(
    service: LiveService, u1: dict[str, str], db_conn: psycopg.AsyncConnection
) -> None:
    before = await _state(db_conn)
    answers = []
    for method, path, body, _ in _routes(u1):
        response = service.client.request(method, path, json=body)
        answers.append((method, path, response.status_code))
        if response.status_code == 403:
            assert "another user's private" in response.json()["detail"]
        elif response.status_code == 200 and path.startswith("/v1/commands"):
            # nothing of u1's is found or confirmed
            assert re.search(r"no memory|confirms no import", response.json()["text"]), (
                response.text
            )
        elif response.status_code == 200:
            assert response.json()["status"] == "not_found", response.text
    assert answers == [(m, p, code) for m, p, _, code in _routes(u1)]
    assert await _state(db_conn) == before
    # and u1 still uses c1 as before
    own = service.client.post("/v1/context", json={"chat": U1_CHAT, "message": "the hive?"})
    assert own.status_code == 200 and "The hive is blue" in own.json()["block"]
    # and in f1, with its Project Memory
    own = service.client.post(
        "/v1/context", json={"chat": U1_IN_F1, "message": "when does the apiary open?"}
    )
    assert own.status_code == 200 and "The apiary opens in May" in own.json()["block"]
    listed = service.client.get("/v1/users/u1/memories?folder_id=f1").json()["items"]
    assert "The apiary opens in May" in [m["content"] for m in listed]


async def test_a_shared_folders_members_keep_its_project_memory(
    service: LiveService, db_conn: psycopg.AsyncConnection
) -> None:
    """A folder its owner shared hands its turns over as collaborative: its other members
    read and write its Project Memory as before (the check refuses private folders only)."""
    client = service.client
    u1_shared = {**U1_IN_F1, "collaborative": True, "collaborative_reason": "folder_shared"}
    turn = {"chat": u1_shared, "user_message_id": "t1", "user_message": "we plan the apiary"}
    assert client.post("/v1/turns", json=turn).status_code == 202
    added = client.post(
        "/v1/commands", json={"chat": U2_IN_F1_SHARED, "command": "/memory add project: May"}
    )
    assert added.status_code == 200 and "Remembered in Project Memory" in added.text, added.text
    listed = client.get("/v1/users/u2/memories?folder_id=f1")
    assert listed.status_code == 200 and listed.json()["total"] == 1, listed.text


async def _state(conn: psycopg.AsyncConnection) -> list[tuple[Any, ...]]:
    """Every memory, turn and reminder row as it matters here."""
    memories = await (
        await conn.execute("SELECT owner_id, content, status, version FROM memories ORDER BY seq")
    ).fetchall()
    turns = await (await conn.execute("SELECT chat_id, user_id FROM turns ORDER BY id")).fetchall()
    reminders = await (await conn.execute("SELECT user_id, content FROM reminders")).fetchall()
    pending = await (await conn.execute("SELECT user_id FROM pending_imports")).fetchall()
    return [*memories, *turns, *reminders, *pending]


async def test_the_folder_check_reads_the_folder_index(db_conn: psycopg.AsyncConnection) -> None:
    """The check's query is one the index of migration 0018 serves (the planner told not to
    scan the table, so a query the index cannot serve would show a Seq Scan)."""
    stmt = (
        select(TurnRow.id)
        .where(turns.folder_of_turn() == "f1", TurnRow.user_id != "u2")
        .order_by(TurnRow.id.desc())
        .limit(1)
    )
    sql = str(stmt.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    await db_conn.execute("SET enable_seqscan = off")
    plan = "\n".join(r[0] for r in await (await db_conn.execute("EXPLAIN " + sql)).fetchall())
    assert "ix_turns_folder" in plan, plan
