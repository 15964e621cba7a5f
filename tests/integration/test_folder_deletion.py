"""A folder deleted in Open WebUI: its Project Memory is forgotten, and its chats' Chat Memory
when the chats were deleted with it (the Memory Events function on `folder.deleted`)."""

from __future__ import annotations

import psycopg

from testkit.filter_loader import FILTER_PATH, load_filter
from testkit.live_service import LiveService


def _chat(chat_id: str, folder_id: str) -> dict[str, object]:
    return {"user_id": "uma", "chat_id": chat_id, "kind": "saved", "folder_id": folder_id}


def _project(service: LiveService, folder_id: str) -> list[str]:
    items = service.client.get(
        "/v1/users/uma/memories", params={"folder_id": folder_id, "bank": "project"}
    ).json()["items"]
    return [m["content"] for m in items]


def _chat_memory(service: LiveService, chat: dict[str, object]) -> str:
    return str(
        service.client.post(
            "/v1/commands", json={"chat": chat, "command": "/memory list chat"}
        ).json()["text"]
    )


async def _folder_deleted(service: LiveService, folder_ids: list[str], *, contents: bool) -> None:
    events = load_filter(FILTER_PATH.parent / "memory_events.py").Event()
    events.valves = events.Valves(service_url=service.base_url, api_key=service.api_key)
    # The payload as Open WebUI 0.12.4 builds it (routers/folders.py, delete_folder_by_id).
    await events.event(
        {
            "event": "folder.deleted",
            "resource": "folder",
            "subject": {"type": "folder", "id": folder_ids[0]},
            "data": {"folder_ids": folder_ids, "delete_contents": contents},
        },
        __event_name__="folder.deleted",
    )


async def test_deleting_a_folder_with_its_chats_forgets_project_and_chat_memory(
    service: LiveService,
    database_url: str,
) -> None:
    for folder_id, fact in (
        ("garden", "The garden uses raised beds"),
        ("garden-sub", "The greenhouse faces south"),
        ("kitchen", "The kitchen gets new tiles"),
    ):
        assert (
            service.client.post(
                "/v1/users/uma/memories",
                json={"content": fact, "bank": "project", "folder_id": folder_id},
            ).status_code
            == 201
        )
    in_garden, in_kitchen = _chat("g1", "garden"), _chat("k1", "kitchen")
    for chat, note in ((in_garden, "Draft of the planting plan"), (in_kitchen, "Tile shop list")):
        service.client.post(
            "/v1/turns", json={"chat": chat, "user_message_id": "m1", "user_message": "Let's plan."}
        )
        service.client.post(
            "/v1/commands", json={"chat": chat, "command": f"/memory add chat: {note}"}
        )

    await _folder_deleted(service, ["garden", "garden-sub"], contents=True)

    assert (_project(service, "garden"), _project(service, "garden-sub")) == ([], [])
    assert _project(service, "kitchen") == ["The kitchen gets new tiles"]
    assert "planting plan" not in _chat_memory(service, in_garden)
    assert "Tile shop list" in _chat_memory(service, in_kitchen)
    with psycopg.connect(database_url) as conn:
        statuses = conn.execute("SELECT chat_id, status FROM turns ORDER BY chat_id").fetchall()
    assert statuses == [("g1", "discarded"), ("k1", "queued")]


async def test_deleting_a_folder_but_keeping_its_chats_keeps_their_chat_memory(
    service: LiveService,
) -> None:
    assert (
        service.client.post(
            "/v1/users/uma/memories",
            json={
                "content": "The garden uses raised beds",
                "bank": "project",
                "folder_id": "garden",
            },
        ).status_code
        == 201
    )
    chat = _chat("g1", "garden")
    service.client.post(
        "/v1/turns", json={"chat": chat, "user_message_id": "m1", "user_message": "Let's plan."}
    )
    service.client.post(
        "/v1/commands", json={"chat": chat, "command": "/memory add chat: Planting plan"}
    )

    await _folder_deleted(service, ["garden"], contents=False)

    assert _project(service, "garden") == []
    assert "Planting plan" in _chat_memory(service, {**chat, "folder_id": None})
