"""A user account deleted in Open WebUI: everything that was only theirs is forgotten."""

from __future__ import annotations

import psycopg

from testkit.filter_loader import FILTER_PATH, load_filter
from testkit.live_service import LiveService


def _chat(user_id: str, chat_id: str, **extra: object) -> dict[str, object]:
    return {"user_id": user_id, "chat_id": chat_id, "kind": "saved", **extra}


async def test_user_deleted_forgets_personal_patterns_and_chat_memory_but_keeps_the_folder(
    service: LiveService,
    database_url: str,
) -> None:
    for content, bank in (
        ("Uma keeps bees", "personal"),
        ("Uma wants short answers", "interaction_patterns"),
    ):
        assert (
            service.client.post(
                "/v1/users/uma/memories", json={"content": content, "bank": bank}
            ).status_code
            == 201
        )
    assert (
        service.client.post(
            "/v1/users/uma/memories",
            json={
                "content": "The garden project uses raised beds",
                "bank": "project",
                "folder_id": "garden",
            },
        ).status_code
        == 201
    )
    service.client.post(
        "/v1/commands",
        json={"chat": _chat("uma", "uma-chat"), "command": "/memory add chat: Draft two is final"},
    )
    service.client.post(
        "/v1/commands", json={"chat": _chat("uma", "uma-chat"), "command": "/memory pause"}
    )
    assert (
        service.client.post(
            "/v1/users/uma/reminders",
            json={"content": "call the vet", "due_at": "2030-01-01T09:00:00Z"},
        ).status_code
        == 201
    )
    assert (
        service.client.post(
            "/v1/users/olga/memories", json={"content": "Olga keeps goats"}
        ).status_code
        == 201
    )

    events = load_filter(FILTER_PATH.parent / "memory_events.py").Event()
    events.valves = events.Valves(service_url=service.base_url, api_key=service.api_key)
    # The payload as Open WebUI 0.12.4 builds it for a deleted account.
    await events.event(
        {
            "event": "user.deleted",
            "resource": "user",
            "subject": {"type": "user", "id": "uma"},
            "data": {},
        },
        __event_name__="user.deleted",
    )

    assert service.client.get("/v1/users/uma/memories").json()["items"] == []
    folder = service.client.get("/v1/users/kai/memories", params={"folder_id": "garden"})
    assert [m["content"] for m in folder.json()["items"]] == ["The garden project uses raised beds"]
    assert [
        m["content"] for m in service.client.get("/v1/users/olga/memories").json()["items"]
    ] == ["Olga keeps goats"]
    block = service.client.post(
        "/v1/context",
        json={
            "chat": _chat("uma", "uma-chat", folder_id="garden"),
            "message": "What do you know about me and the draft?",
        },
    ).json()["block"]
    assert "bees" not in block and "Draft two" not in block and "short answers" not in block
    with psycopg.connect(database_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM memories WHERE owner_id IN ('uma', 'uma-chat') AND content <> ''"
        ).fetchone()
        settings = conn.execute(
            "SELECT count(*) FROM user_settings WHERE user_id = 'uma'"
        ).fetchone()
        reminders = conn.execute(
            "SELECT count(*) FROM reminders WHERE user_id = 'uma' AND content <> ''"
        ).fetchone()
    assert (left, settings, reminders) == ((0,), (0,), (0,))
    # a second delivery of the same event finds nothing left to forget
    assert service.client.delete("/v1/users/uma/memories").json() == {"forgotten": 0}
