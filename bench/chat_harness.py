"""Drive the memory filter the way Open WebUI 0.12.4 does for a saved chat, without Open WebUI.

Sources for every shape here: `../shared/openwebui/CONTRACT.md` §1 (loading, reserved keyword
arguments, valves), §2 (`__metadata__` and the inlet `body`) and §3 (the outlet `body` of a
saved chat: the DB branch, each message `{id, role, content, timestamp}`, ending with the new
assistant message whose id is `body["id"]`).

`SavedChat` keeps one chat's DB branch; `FilterHarness` calls the filter's hooks with only the
reserved arguments their signatures name, as `get_filter_params` in Open WebUI does.
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testkit import filter_loader

__all__ = [
    "DEFAULT_FILTER_PATH",
    "FILTER_ID",
    "MODEL_ID",
    "FilterHarness",
    "HookCall",
    "SavedChat",
    "load_filter_instance",
    "set_valves",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The filter file in this repository.
DEFAULT_FILTER_PATH = REPO_ROOT / "filter" / "memory_filter.py"
#: The function id the filter would have once installed in Open WebUI.
FILTER_ID = "memory_filter"
#: The model every replayed chat talks to (the LLM stub serves it).
MODEL_ID = "stub-model"


def load_filter_instance(path: str | Path = DEFAULT_FILTER_PATH) -> Any:
    """Load the filter file as Open WebUI does and return `Filter()`.

    Raises:
        TypeError: when the file defines no `Filter` class.
    """
    module = filter_loader.load_filter(Path(path))
    filter_class = getattr(module, "Filter", None)
    if not isinstance(filter_class, type):
        raise TypeError(f"{path} defines no Filter class")
    return filter_class()


def set_valves(instance: Any, values: Mapping[str, Any]) -> list[str]:
    """Replace `instance.valves` with `Valves(**stored)`, as Open WebUI does before each hook.

    Returns:
        the names in `values` that `Valves` does not declare (those are not applied).
    """
    valves_class = type(instance.valves)
    declared = valves_class.model_fields
    stored = instance.valves.model_dump()
    unknown = [name for name in values if name not in declared]
    stored.update({name: value for name, value in values.items() if name in declared})
    instance.valves = valves_class(**stored)
    return unknown


@dataclass
class HookCall:
    """What one hook call returned and emitted."""

    body: dict[str, Any]  #: the body the hook returned
    events: list[dict[str, Any]]  #: events passed to `__event_emitter__`, in order
    elapsed_ms: float  #: wall time of the hook call, milliseconds

    @property
    def system_text(self) -> str:
        """Text of every system message in the returned body, joined by blank lines."""
        parts: list[str] = []
        for message in self.body.get("messages") or []:
            if not isinstance(message, dict) or message.get("role") != "system":
                continue
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return "\n\n".join(parts)


@dataclass
class SavedChat:
    """One saved chat of one user: a uuid chat id and the DB branch of its messages.

    Message timestamps are epoch seconds, as Open WebUI stores them. The client stamps a
    user message with `timestamp_s` (`__metadata__["user_message"]`); Open WebUI 0.12.4
    stores a new message of a saved chat with its own clock instead (`Chats.insert_chat_turn`),
    which `stored_at_s` stands for: set it to replay an old chat as Open WebUI saves it today.
    """

    user: dict[str, Any]  #: the `__user__` dict of the chat's owner (who also sends)
    timestamp_s: int  #: epoch seconds given to every message of the chat
    chat_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    messages: list[dict[str, Any]] = field(default_factory=list)  #: the DB branch, oldest first
    #: epoch seconds the stored copies of new messages carry; None = `timestamp_s`
    stored_at_s: int | None = None

    def add_assistant_opening(self, text: str) -> None:
        """Start the chat with an assistant message (e.g. the other speaker opening a session)."""
        self.messages.append(self._message("assistant", text))

    def _message(self, role: str, content: str) -> dict[str, Any]:
        return {
            "id": str(uuid.uuid4()),
            "role": role,
            "content": content,
            "timestamp": self.timestamp_s,
        }

    def inlet_request(self, text: str) -> tuple[dict[str, Any], dict[str, Any], str, str]:
        """Body and `__metadata__` for a new user message (CONTRACT §2).

        Returns:
            (body, metadata, user message id, assistant message id); `body["metadata"]` is the
            same dict object as `metadata`, as in Open WebUI.
        """
        user_message_id, assistant_id = str(uuid.uuid4()), str(uuid.uuid4())
        parent_id = self.messages[-1]["id"] if self.messages else None
        features = {"memory": True}
        name = self.user.get("name")
        today = datetime.fromtimestamp(self.timestamp_s, UTC).strftime("%Y-%m-%d")
        metadata: dict[str, Any] = {
            "user_id": self.user["id"],
            "user_agent": "locomo-replay",
            "internal": False,
            "chat_id": self.chat_id,
            "message_id": assistant_id,
            "session_id": None,
            "user_message": {
                "id": user_message_id,
                "parentId": parent_id,
                "childrenIds": [],
                "role": "user",
                "content": text,
                "timestamp": self.timestamp_s,
                "models": [MODEL_ID],
            },
            "user_message_id": user_message_id,
            "assistant_message_id": None,
            "regeneration_message_id": None,
            "automation_id": None,
            "folder_id": None,
            "filter_ids": [],
            "tool_ids": None,
            "tool_servers": [],
            "files": None,
            "tool_approval_resume": None,
            "features": features,
            "variables": {
                "{{USER_NAME}}": name,
                "{{CURRENT_DATE}}": today,
            },
            "chat_variables": {},
            "chat_context": None,
            "model": _model_dict(),
            "direct": False,
            "params": {},
            "include_file_context": True,
        }
        history = [{"role": m["role"], "content": m["content"]} for m in self.messages]
        body = {
            "model": MODEL_ID,
            "messages": [*history, {"role": "user", "content": text}],
            "stream": False,
            "features": features,
            "metadata": metadata,
        }
        return body, metadata, user_message_id, assistant_id

    def record_turn(
        self, *, user_message_id: str, text: str, assistant_id: str, reply: str
    ) -> dict[str, Any]:
        """Store the user message and the reply in the branch; return the outlet body (§3)."""
        stored = self.timestamp_s if self.stored_at_s is None else self.stored_at_s
        self.messages.append(
            {"id": user_message_id, "role": "user", "content": text, "timestamp": stored}
        )
        self.messages.append(
            {"id": assistant_id, "role": "assistant", "content": reply, "timestamp": stored}
        )
        return {
            "model": MODEL_ID,
            "messages": [dict(m) for m in self.messages],
            "chat_id": self.chat_id,
            "session_id": None,
            "id": assistant_id,
            "filter_ids": [],
        }


def _model_dict() -> dict[str, Any]:
    """A minimal `__model__` / `metadata["model"]` for the stub model."""
    return {
        "id": MODEL_ID,
        "name": MODEL_ID,
        "object": "model",
        "owned_by": "openai",
        "info": {"meta": {"filterIds": [FILTER_ID]}},
    }


class FilterHarness:
    """Calls one filter instance's hooks with Open WebUI's reserved keyword arguments."""

    def __init__(self, instance: Any) -> None:
        self.instance = instance

    def make_user(self, *, user_id: str, name: str) -> dict[str, Any]:
        """A `__user__` dict (CONTRACT §1), with `valves` as a `UserValves` instance."""
        user: dict[str, Any] = {
            "id": user_id,
            "email": f"{user_id}@example.invalid",
            "username": user_id,
            "name": name,
            "role": "user",
            "profile_image_url": "",
            "info": None,
            "settings": None,
        }
        user_valves = getattr(self.instance, "UserValves", None)
        if isinstance(user_valves, type):
            user["valves"] = user_valves()
        return user

    async def inlet(
        self, chat: SavedChat, body: dict[str, Any], metadata: dict[str, Any]
    ) -> HookCall:
        """Run `inlet` for a saved-chat turn and time it."""
        return await self._call(
            "inlet",
            body,
            {
                "__user__": chat.user,
                "__metadata__": metadata,
                "__chat_id__": metadata["chat_id"],
                "__message_id__": metadata["message_id"],
                "__oauth_token__": None,
            },
        )

    async def outlet(
        self, chat: SavedChat, body: dict[str, Any], metadata: dict[str, Any]
    ) -> HookCall:
        """Run the inline `outlet` of a saved chat (no `__chat_id__`/`__message_id__`)."""
        return await self._call("outlet", body, {"__user__": chat.user, "__metadata__": metadata})

    async def _call(self, hook_name: str, body: dict[str, Any], extra: dict[str, Any]) -> HookCall:
        hook = getattr(self.instance, hook_name)
        events: list[dict[str, Any]] = []

        async def event_emitter(event: dict[str, Any]) -> None:
            events.append(event)

        async def event_call(event: dict[str, Any]) -> dict[str, Any]:  # noqa: ARG001
            # What Open WebUI answers when no browser is connected (CONTRACT §4).
            return {"error": "no client connected"}

        available = {
            "__id__": FILTER_ID,
            "__event_emitter__": event_emitter,
            "__event_call__": event_call,
            "__request__": None,
            "__model__": _model_dict(),
            **extra,
        }
        parameters = inspect.signature(hook).parameters
        params = {"body": body} | {k: v for k, v in available.items() if k in parameters}
        started = time.perf_counter()
        result = hook(**params)
        if inspect.isawaitable(result):
            result = await result
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        return HookCall(
            body=result if isinstance(result, dict) else body, events=events, elapsed_ms=elapsed_ms
        )
