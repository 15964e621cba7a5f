"""Every route that takes a chat, message, memory or reminder id, called for another user
with ids of u1's (issue 27, item 4): nothing of u1's is read, changed or written.

The chat routes get a defence in depth of their own (service/flows/chat_owner.py): c1 was
handed over as u1's private chat, so a request naming c1 for u2 — forged, or from an Open
WebUI that returns a chat to any caller — answers 403 with a sentence. Before, each of them
answered 200: u2's inlet read c1's Chat Memory, and u2's Remember click or `/memory add
chat:` wrote into it, which u1's inlet then injected. Memory and reminder ids were already
scoped to the user in the path (404).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from testkit.live_service import LiveService

U1_CHAT = {"user_id": "u1", "chat_id": "c1", "kind": "saved"}
U2_IN_C1 = {"user_id": "u2", "chat_id": "c1", "kind": "saved"}
U2_IN_C1_SHARED = {**U2_IN_C1, "collaborative": True, "collaborative_reason": "sender_not_owner"}


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
    return {"memory": personal.json()["id"], "reminder": reminder.json()["id"]}


def _routes(ids: dict[str, str]) -> list[tuple[str, str, dict[str, Any] | None, int]]:
    """(method, path, body, the answer for u2) of every id-bearing route."""
    memory, reminder = ids["memory"], ids["reminder"]
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
            assert "another user's private chat" in response.json()["detail"]
    assert answers == [(m, p, code) for m, p, _, code in _routes(u1)]
    assert await _state(db_conn) == before
    # and u1 still uses c1 as before
    own = service.client.post("/v1/context", json={"chat": U1_CHAT, "message": "the hive?"})
    assert own.status_code == 200 and "The hive is blue" in own.json()["block"]


async def _state(conn: psycopg.AsyncConnection) -> list[tuple[Any, ...]]:
    """Every memory, turn and reminder row as it matters here."""
    memories = await (
        await conn.execute("SELECT owner_id, content, status, version FROM memories ORDER BY seq")
    ).fetchall()
    turns = await (await conn.execute("SELECT chat_id, user_id FROM turns ORDER BY id")).fetchall()
    reminders = await (await conn.execute("SELECT user_id, content FROM reminders")).fetchall()
    return [*memories, *turns, *reminders]
