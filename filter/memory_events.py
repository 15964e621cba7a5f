"""
title: Memory Events
author: Memory Banks contributors
version: 0.1.0
required_open_webui_version: 0.12.0
description: Companion of the Memory Banks filter. When a chat, a folder or a user account is deleted in Open WebUI, the memory service forgets the memories that belonged to it only.
license: MIT
"""

import logging
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)


class Event:
    class Valves(BaseModel):
        service_url: str = Field(
            default="http://127.0.0.1:8765",
            description="Base URL of the memory service.",
        )
        api_key: str = Field(
            default="",
            description="Bearer key of the memory service (MEMORY_API_KEY).",
        )
        timeout_s: float = Field(
            default=5.0,
            gt=0,
            description="Seconds to wait for the service.",
        )

    def __init__(self) -> None:
        self.valves = self.Valves()

    async def event(
        self,
        event: Any = None,
        __event_name__: str | None = None,
    ) -> None:
        """On `chat.deleted` / `chat.deleted_all`, ask the service to forget Chat Memory; on
        `folder.deleted`, the folders' Project Memory (and their chats' Chat Memory when the
        chats went with them); on `user.deleted`, everything that was only that user's.

        Open WebUI 0.12 passes the event as a dict whose `subject` names what it is about:
        `{"event": "chat.deleted", "subject": {"type": "chat", "id": <chat id>}, ...}` and
        `{"event": "chat.deleted_all", "subject": {"type": "user", "id": <user id>}, ...}`.
        """
        payload: dict[str, Any] = event if isinstance(event, dict) else {}
        name = __event_name__ or payload.get("event")
        subject = _dict(payload.get("subject"))
        subject_id = subject.get("id")
        if not isinstance(subject_id, str) or not subject_id:
            return
        try:
            if name == "chat.deleted" and subject.get("type") == "chat":
                await _delete(self.valves, f"/v1/chats/{quote(subject_id, safe='')}/memories")
            elif name == "chat.deleted_all" and subject.get("type") == "user":
                await _delete(self.valves, f"/v1/users/{quote(subject_id, safe='')}/chat-memories")
            elif name == "folder.deleted":
                data = _dict(payload.get("data"))
                ids = data.get("folder_ids") or [subject_id]
                with_chats = "true" if data.get("delete_contents") else "false"
                for folder_id in [i for i in ids if isinstance(i, str) and i]:
                    await _delete(
                        self.valves,
                        f"/v1/folders/{quote(folder_id, safe='')}/memories?with_chats={with_chats}",
                    )
            elif name == "user.deleted" and subject.get("type") == "user":
                await _delete(self.valves, f"/v1/users/{quote(subject_id, safe='')}/memories")
        except Exception as exc:  # an event handler must never break Open WebUI
            log.warning("memory service did not take %s: %r", name, exc)


def _dict(value: object) -> dict[str, Any]:
    """`value` when the event gave an object there, else an empty one."""
    return value if isinstance(value, dict) else {}


async def _delete(valves: Event.Valves, path: str) -> None:
    headers = {"Authorization": f"Bearer {valves.api_key}"} if valves.api_key else {}
    async with httpx.AsyncClient(timeout=valves.timeout_s, trust_env=False) as client:
        response = await client.delete(valves.service_url.rstrip("/") + path, headers=headers)
    response.raise_for_status()
