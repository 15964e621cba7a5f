"""Dates are checked at the edge, and no stored date can make a user's memory unreadable."""

from __future__ import annotations

import psycopg
import pytest

from testkit.live_service import LiveService

CHAT = {"user_id": "u1", "chat_id": "chat-1", "kind": "saved"}

YEAR_ONE = "0001-01-01T00:00:00+05:00"  # 1 BC in UTC: no Python datetime can hold it
FAR_AHEAD = "9999-12-31T23:00:00-05:00"  # past year 9999 in UTC


@pytest.mark.parametrize("when", [YEAR_ONE, FAR_AHEAD, "1969-12-31T23:59:59+00:00"])
def test_every_date_the_api_accepts_is_refused_outside_a_sane_range(
    service: LiveService, when: str
) -> None:
    requests = [
        (
            "/v1/turns",
            {"chat": CHAT, "user_message_id": "m1", "user_message": "hi", "occurred_at": when},
        ),
        ("/v1/context", {"chat": CHAT, "message": "hi", "now": when}),
        ("/v1/commands", {"chat": CHAT, "command": "/memory list", "now": when}),
        ("/v1/users/u1/reminders", {"content": "call Sam", "due_at": when}),
    ]
    for path, body in requests:
        answer = service.client.post(path, json=body)
        assert answer.status_code == 422, (path, answer.text)
        assert "a date between 1970-01-01 and" in answer.json()["detail"], answer.text
    assert service.client.get("/v1/status").json()["turns_queued"] == 0


def test_a_date_inside_the_range_is_accepted(service: LiveService) -> None:
    turn = {
        "chat": CHAT,
        "user_message_id": "m1",
        "user_message": "I like tea",
        "occurred_at": "2024-03-01T08:00:00+01:00",
    }
    assert service.client.post("/v1/turns", json=turn).status_code == 202


async def test_a_stored_odd_date_never_makes_a_users_memory_unreadable(
    service: LiveService, db_conn: psycopg.AsyncConnection
) -> None:
    for text in ("User likes tea", "User has a cat", "User lives in Lyon"):
        answer = service.client.post("/v1/users/u1/memories", json={"content": text})
        assert answer.status_code == 201
    # rows older tooling or a direct import may have left behind: 1 BC and beyond 9999
    await db_conn.execute(
        "UPDATE memories SET created_at = %s, updated_at = %s WHERE content = 'User likes tea'",
        (YEAR_ONE, YEAR_ONE),
    )
    await db_conn.execute(
        "UPDATE memories SET created_at = '20000-01-01', last_used_at = '0001-01-01 BC' "
        "WHERE content = 'User has a cat'"
    )
    listing = service.client.get("/v1/users/u1/memories")
    assert listing.status_code == 200, listing.text
    assert listing.json()["total"] == 3
    export = service.client.get("/v1/users/u1/memories/export")
    assert export.status_code == 200, export.text
    assert sorted(m["content"] for m in export.json()) == [
        "User has a cat",
        "User likes tea",
        "User lives in Lyon",
    ]
    found = service.client.get("/v1/users/u1/memories/search", params={"q": "tea"})
    assert (found.status_code, found.json()["total"]) == (200, 1)
    context = service.client.post("/v1/context", json={"chat": CHAT, "message": "tea or cat?"})
    assert context.status_code == 200, context.text
    tea = next(m for m in listing.json()["items"] if m["content"] == "User likes tea")
    assert service.client.delete(f"/v1/users/u1/memories/{tea['id']}").status_code == 204
    gone = service.client.delete("/v1/users/u1/memories")
    assert (gone.status_code, gone.json()) == (200, {"forgotten": 2})
    rows = await (await db_conn.execute("SELECT status, content FROM memories")).fetchall()
    assert sorted(rows) == [("deleted", ""), ("deleted", ""), ("deleted", "")]
