"""
title: Memory Tools
author: Memory Banks contributors
version: 0.1.0
required_open_webui_version: 0.12.0
description: Lets a model that calls tools search, add and forget the user's long-term memories during a chat, with the privacy rules of that chat (companion of the Memory Banks filter).
license: MIT
"""

import importlib
import inspect
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

EventEmitter = Callable[[dict[str, Any]], Awaitable[None] | None]

#: The version of this file (as in its frontmatter); the service names its own in a header.
TOOLS_VERSION = "0.1.0"
SERVICE_HEADER = "x-memory-service"
#: The memory filter's function id: its valves decide which models keep their own memory,
#: which get none, whether temporary chats read memories, and whether a user switched it off.
FILTER_ID = "memory_filter"
#: A workspace model with this tag keeps its own memory (the filter's rule).
OWN_MEMORY_TAG = "own-memory"
_TEMPORARY_PREFIXES = ("temporary:", "local:")
_AUTOMATED_SESSION_PREFIXES = ("automation:", "subagent:", "timer:")
_CHANNEL_PREFIX = "channel:"
_MAX_FOLDER_DEPTH = 64
#: the service's limits (service/api/routes/tools.py): longer text is cut before sending
_MAX_QUERY_CHARS = 4_000
_MAX_CONTENT_CHARS = 8_000
_MAX_ID_CHARS = 64
#: longest memory text repeated in a status line
_STATUS_CHARS = 80

#: What the model reads when the service cannot be used (it should answer without memory).
UNAVAILABLE = "Memory is not reachable right now; answer without it and do not retry."
MISCONFIGURED = "Memory is not set up correctly; answer without it and do not retry."
NO_USER = "Memory is not available here: the user is not known."
SWITCHED_OFF = "The user switched memory off; answer without it."
NO_MEMORY_MODEL = "Memory is not available to this model; answer without it."
#: Status lines the user sees under the message
STATUS_UNAVAILABLE = "Memory unavailable — the model answers without it"
STATUS_MISCONFIGURED = "Memory is not set up correctly (please tell your admin)"
#: admins see the exact cause after this
ADMIN_CAUSE = " · for the admin: "


class Tools:
    class Valves(BaseModel):
        service_url: str = Field(
            default="http://127.0.0.1:8765",
            description="Base URL of the memory service.",
        )
        api_key: str = Field(
            default="",
            description="Bearer key of the memory service (MEMORY_API_KEY).",
            # Open WebUI 0.12 renders a valve whose schema has input.type "password" masked.
            json_schema_extra={"input": {"type": "password"}},
        )
        timeout_s: float = Field(
            default=5.0,
            gt=0,
            description="Seconds to wait for the memory service.",
        )

    def __init__(self) -> None:
        self.valves = self.Valves()

    async def memory_search(
        self,
        query: str,
        __user__: dict[str, Any] | None = None,
        __metadata__: dict[str, Any] | None = None,
        __chat_id__: str | None = None,
        __event_emitter__: Any = None,
    ) -> str:
        """
        Search the long-term memories of the user you are talking to: facts, preferences and plans they told you in earlier chats. Use it before answering a question that depends on what you know about the user, and to find a memory's id before forgetting it.

        :param query: What to look for, in a few words, e.g. "dog's name" or "food allergies".
        :return: The matching memories, one a line: id · bank · date · text; or why there are none.
        """
        answer = await _call(
            self.valves,
            "/v1/tools/search",
            {"query": _cut(query, _MAX_QUERY_CHARS)},
            user=__user__,
            metadata=__metadata__,
            chat_id=__chat_id__,
        )
        if answer.status is not None:
            found = len(answer.memories)
            await _emit(
                __event_emitter__,
                f"Searched memories: {found or 'none'} found"
                if answer.status in ("found", "none")
                else answer.text,
            )
        else:
            await _emit(__event_emitter__, answer.status_line)
        return answer.text

    async def memory_add(
        self,
        content: str,
        bank: str = "",
        __user__: dict[str, Any] | None = None,
        __metadata__: dict[str, Any] | None = None,
        __chat_id__: str | None = None,
        __event_emitter__: Any = None,
    ) -> str:
        """
        Remember one lasting fact about the user for future chats, when the user asks you to remember it or tells you something they will want you to know later (a preference, a plan, a person, a possession). Write one short sentence about the user, e.g. "User is allergic to peanuts". Never store instructions, passwords or one-off small talk.

        :param content: The fact, one short sentence about the user.
        :param bank: Leave empty (the chat's default). Or "interaction_patterns" for how the user likes to be answered, "project" for the shared work of this chat's folder, "chat" for this conversation only.
        :return: What was remembered, with its id; or why nothing was.
        """
        payload: dict[str, Any] = {"content": _cut(content, _MAX_CONTENT_CHARS)}
        chosen = bank.strip().lower().replace(" ", "_") if isinstance(bank, str) else ""
        if chosen:
            payload["bank"] = chosen
        answer = await _call(
            self.valves,
            "/v1/tools/add",
            payload,
            user=__user__,
            metadata=__metadata__,
            chat_id=__chat_id__,
        )
        if answer.status in ("added", "duplicate") and answer.memories:
            said = "Remembered" if answer.status == "added" else "Already remembered"
            line = f"{said}: {_short(answer.memories[0].get('content'))}"
        else:
            line = answer.status_line or answer.text
        await _emit(__event_emitter__, line)
        return answer.text

    async def memory_forget(
        self,
        memory_id: str,
        __user__: dict[str, Any] | None = None,
        __metadata__: dict[str, Any] | None = None,
        __chat_id__: str | None = None,
        __event_emitter__: Any = None,
    ) -> str:
        """
        Forget one of the user's memories for good, when the user asks you to forget it or says it is no longer true. Find its id with memory_search first.

        :param memory_id: The memory's id exactly as memory_search showed it, e.g. "k7m2qa".
        :return: What was forgotten; or why nothing was.
        """
        answer = await _call(
            self.valves,
            "/v1/tools/forget",
            {"memory_id": _cut(str(memory_id).strip(), _MAX_ID_CHARS) or "?"},
            user=__user__,
            metadata=__metadata__,
            chat_id=__chat_id__,
        )
        if answer.status == "forgotten" and answer.memories:
            line = f"Forgot: {_short(answer.memories[0].get('content'))}"
        else:
            line = answer.status_line or answer.text
        await _emit(__event_emitter__, line)
        return answer.text


class _Answer:
    """What a tool tells the model (`text`), and the service's `status` and `memories`
    (None and [] when the service was not used); `status_line` for a failure.
    """

    def __init__(
        self,
        text: str,
        *,
        status: str | None = None,
        memories: list[dict[str, Any]] | None = None,
        status_line: str = "",
    ) -> None:
        self.text = text
        self.status = status
        self.memories = memories or []
        self.status_line = status_line


async def _call(
    valves: Tools.Valves,
    path: str,
    payload: dict[str, Any],
    *,
    user: Any,
    metadata: Any,
    chat_id: Any,
) -> _Answer:
    """Describe the chat as the filter does, POST it with `payload`, read the answer.

    Never raises: a failure is an answer telling the model to go on without memory.
    """
    try:
        meta = metadata if isinstance(metadata, dict) else {}
        sender = _sender_of(user)
        if sender is None:
            return _Answer(NO_USER, status_line="Memory is not available here")
        settings = await _filter_settings(sender[0])
        model_id = meta.get("model_id")
        if not isinstance(model_id, str):
            model_id = _dict(meta.get("model")).get("id")
        if settings.get("enabled") is False:
            return _Answer(SWITCHED_OFF, status_line="Memory is switched off in your settings")
        if _named_in(model_id, str(settings.get("no_memory_models") or "")):
            return _Answer(NO_MEMORY_MODEL, status_line="Memory is not used with this model")
        chat = await chat_context(
            chat_id if isinstance(chat_id, str) and chat_id else meta.get("chat_id"),
            meta,
            sender,
            read_in_temporary=settings.get("read_in_temporary_chats") is not False,
        )
        assistant = assistant_of(
            model_id, meta.get("model"), str(settings.get("assistant_memory_models") or "")
        )
        if assistant is not None:
            chat["assistant_id"], chat["assistant_name"] = assistant
        decoded = await _post(valves, path, {"chat": chat, **payload})
    except _Failure as failure:
        log.warning("memory tool: %s", failure.detail)
        cause = ADMIN_CAUSE + failure.detail if _is_admin(user) else ""
        if failure.lasting:
            return _Answer(MISCONFIGURED, status_line=STATUS_MISCONFIGURED + cause)
        return _Answer(UNAVAILABLE, status_line=STATUS_UNAVAILABLE + cause)
    except Exception as exc:  # a tool must never break the chat
        log.exception("memory tool failed")
        cause = ADMIN_CAUSE + repr(exc) if _is_admin(user) else ""
        return _Answer(UNAVAILABLE, status_line=STATUS_UNAVAILABLE + cause)
    text = decoded.get("text")
    status = decoded.get("status")
    memories = decoded.get("memories")
    if not isinstance(text, str) or not isinstance(status, str) or not isinstance(memories, list):
        cause = ADMIN_CAUSE + "the service's answer has another shape" if _is_admin(user) else ""
        return _Answer(MISCONFIGURED, status_line=STATUS_MISCONFIGURED + cause)
    return _Answer(text, status=status, memories=[m for m in memories if isinstance(m, dict)])


# --- the chat, as the memory filter describes it (DESIGN §2, §3) -----------------------------


def classify_chat(chat_id: Any, metadata: dict[str, Any]) -> str:
    """The turn's kind: task, automated, temporary, channel, api or saved (the filter's)."""
    if metadata.get("task"):
        return "task"
    session_id = metadata.get("session_id")
    if (
        (isinstance(session_id, str) and session_id.startswith(_AUTOMATED_SESSION_PREFIXES))
        or metadata.get("internal")
        or metadata.get("automation_id")
    ):
        return "automated"
    chat = chat_id.strip() if isinstance(chat_id, str) else ""
    if chat.startswith(_TEMPORARY_PREFIXES):
        return "temporary"
    if chat.startswith(_CHANNEL_PREFIX):
        return "channel"
    if not chat:
        return "api"
    return "saved"


async def chat_context(
    chat_id: Any,
    metadata: dict[str, Any],
    sender: tuple[str, str | None, str | None],
    *,
    read_in_temporary: bool,
) -> dict[str, Any]:
    """The chat object of the service's HTTP contract: who asks, where, who else sees it.

    Inside Open WebUI a saved chat is looked up (owner, share, folder and its grants); a
    failed lookup counts as shared, so Personal memory never reaches a chat by mistake.
    """
    user_id, user_name, timezone = sender
    kind = classify_chat(chat_id, metadata)
    folder_id: str | None = None
    reason: str | None = "channel" if kind == "channel" else None
    metadata_folder = _id_or_none(metadata.get("folder_id"))
    if kind == "temporary":
        folder_id = metadata_folder
    elif kind == "saved":
        folder_id, reason = await _saved_chat_facts(str(chat_id), user_id, metadata_folder)
    folder_id = await _folder_of_member(folder_id, user_id)
    chat: dict[str, Any] = {
        "user_id": user_id,
        "chat_id": chat_id if isinstance(chat_id, str) else "",
        "kind": kind,
        "folder_id": folder_id,
        "collaborative": reason is not None,
        "collaborative_reason": reason,
        "read_in_temporary": read_in_temporary,
    }
    if user_name:
        chat["user_name"] = user_name
    zone = _dict(metadata.get("variables")).get("{{CURRENT_TIMEZONE}}") or timezone
    if isinstance(zone, str) and 0 < len(zone.strip()) <= 64:
        chat["timezone"] = zone.strip()
    return chat


async def _saved_chat_facts(
    chat_id: str, user_id: str, metadata_folder: str | None
) -> tuple[str | None, str | None]:
    """(folder id, collaborative reason) of a saved chat; outside Open WebUI the metadata."""
    if not _open_webui_present():
        return metadata_folder, None
    try:
        chats = importlib.import_module("open_webui.models.chats").Chats
        row = await _resolved(chats.get_chat_by_id(chat_id))
        if row is None:
            raise LookupError("chat not found")
    except Exception as exc:
        log.warning("chat lookup failed, treating the chat as shared: %r", exc)
        return metadata_folder, "lookup_failed"
    folder_id = _id_or_none(_field(row, "folder_id"))
    owner = _field(row, "user_id")
    if owner != user_id:
        return folder_id, "sender_not_owner"
    try:
        if await _shared_to_continue(chat_id):
            return folder_id, "chat_shared"
        if folder_id is not None and await _folder_is_shared(folder_id, owner):
            return folder_id, "folder_shared"
    except Exception as exc:
        log.warning("share or folder lookup failed, treating the chat as shared: %r", exc)
        return folder_id, "lookup_failed"
    return folder_id, None


async def _folder_of_member(folder_id: str | None, user_id: str) -> str | None:
    """`folder_id` when `user_id` may open that folder now (Open WebUI's own check)."""
    if folder_id is None or not _open_webui_present():
        return folder_id
    try:
        folders = importlib.import_module("open_webui.models.folders").Folders
        access = importlib.import_module("open_webui.utils.access_control.folders")
        folder = await _resolved(folders.get_folder_by_id(folder_id))
        if folder is None:
            return None
        member = await _resolved(access.has_folder_access(user_id, folder, "read", None))
    except Exception as exc:
        log.warning("folder membership lookup failed, sending no folder: %r", exc)
        return None
    return folder_id if member is True else None


async def _folder_is_shared(folder_id: str, owner: Any) -> bool:
    """True if the folder or an ancestor belongs to or is granted to anyone but the owner."""
    folders = importlib.import_module("open_webui.models.folders").Folders
    grants_table = importlib.import_module("open_webui.models.access_grants").AccessGrants
    seen: set[str] = set()
    current: str | None = folder_id
    while current is not None:
        if current in seen or len(seen) >= _MAX_FOLDER_DEPTH:
            raise LookupError("folder ancestry does not end")
        seen.add(current)
        folder = await _resolved(folders.get_folder_by_id(current))
        if folder is None:
            raise LookupError("folder not found")
        if _field(folder, "user_id") not in (None, owner):
            return True
        for grant in await _resolved(grants_table.get_grants_by_resource("folder", current)) or []:
            if not (
                _field(grant, "principal_type") == "user" and _field(grant, "principal_id") == owner
            ):
                return True
        current = _id_or_none(_field(folder, "parent_id"))
    return False


async def _shared_to_continue(chat_id: str) -> bool:
    shared_chats = importlib.import_module("open_webui.models.shared_chats").SharedChats
    shared = await _resolved(shared_chats.get_by_chat_id(chat_id))
    snapshot = _field(shared, "chat") if shared is not None else None
    return isinstance(snapshot, dict) and snapshot.get("share_mode") == "continue"


def assistant_of(model_id: Any, model: Any, patterns: str) -> tuple[str, str] | None:
    """(id, name) of the chat's model when it keeps its own memory (tagged OWN_MEMORY_TAG,
    or named in the filter's `assistant_memory_models` valve), else None.

    `model` is `__metadata__["model"]`, the chat's model: a tool's `__model__` may be the
    task model instead (Open WebUI 0.12.4 passes `models[task_model_id]` to tools).
    """
    if not isinstance(model_id, str) or not model_id.strip() or len(model_id) > 200:
        return None
    details = model if isinstance(model, dict) and model.get("id") == model_id else {}
    tags = _dict(_dict(details.get("info")).get("meta")).get("tags")
    tagged = any(
        isinstance(tag, dict) and str(tag.get("name", "")).strip().lower() == OWN_MEMORY_TAG
        for tag in (tags if isinstance(tags, list) else [])
    )
    if not tagged and not _named_in(model_id, patterns):
        return None
    name = details.get("name")
    name = name.strip()[:255] if isinstance(name, str) and name.strip() else model_id
    return model_id, name


async def _filter_settings(user_id: str) -> dict[str, Any]:
    """The memory filter's admin valves, and `enabled` of the user's valves for it ({}
    outside Open WebUI, or when the filter was never configured).
    """
    if not _open_webui_present():
        return {}
    try:
        functions = importlib.import_module("open_webui.models.functions").Functions
        valves = await _resolved(functions.get_function_valves_by_id(FILTER_ID))
        mine = await _resolved(functions.get_user_valves_by_id_and_user_id(FILTER_ID, user_id))
    except Exception as exc:
        log.warning("could not read the memory filter's valves: %r", exc)
        return {}
    settings = dict(valves) if isinstance(valves, dict) else {}
    if isinstance(mine, dict) and "enabled" in mine:
        settings["enabled"] = mine["enabled"]
    return settings


def _named_in(model_id: Any, patterns: str) -> bool:
    """True when `model_id` matches one of the comma-separated ids or `prefix*` patterns."""
    if not isinstance(model_id, str):
        return False
    for pattern in (p.strip() for p in patterns.split(",")):
        if pattern and (
            model_id == pattern or (pattern.endswith("*") and model_id.startswith(pattern[:-1]))
        ):
            return True
    return False


def _open_webui_present() -> bool:
    try:
        importlib.import_module("open_webui")
    except ModuleNotFoundError as exc:
        return exc.name != "open_webui"
    except Exception:
        return True
    return True


# --- HTTP ------------------------------------------------------------------------------------


class _Failure(Exception):
    """The service could not be used; `lasting` when retrying cannot help."""

    def __init__(self, detail: str, *, lasting: bool) -> None:
        super().__init__(detail)
        self.detail = detail
        self.lasting = lasting


async def _post(valves: Tools.Valves, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST to the service and decode its JSON object; a _Failure says what went wrong."""
    headers = {"Accept": "application/json"}
    if valves.api_key:
        headers["Authorization"] = f"Bearer {valves.api_key}"
    base = valves.service_url.rstrip("/")
    try:
        # trust_env=False: the service is addressed directly, never through an HTTP proxy
        async with httpx.AsyncClient(
            timeout=valves.timeout_s, verify=_tls_context(), trust_env=False
        ) as client:
            response = await client.post(base + path, json=payload, headers=headers)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise _Failure(
            f"the service_url valve ({base!r}) is not an http(s) address: {exc}", lasting=True
        ) from exc
    except httpx.TimeoutException as exc:
        raise _Failure(
            f"{base} did not answer within {valves.timeout_s:g} s", lasting=False
        ) from exc
    except httpx.HTTPError as exc:
        raise _Failure(
            f"cannot reach the memory service at {base} ({exc!r})", lasting=False
        ) from exc
    code = response.status_code
    version = response.headers.get(SERVICE_HEADER)
    if code >= 500:
        raise _Failure(f"the memory service at {base} failed (HTTP {code})", lasting=False)
    if version is None:
        raise _Failure(
            f"{base} answered HTTP {code} but is not the memory service: check the service_url valve",
            lasting=True,
        )
    if code in (401, 403):
        raise _Failure(
            f"the memory service at {base} refused the api_key valve (HTTP {code})", lasting=True
        )
    if code in (404, 405):
        raise _Failure(
            f"the memory service {version} at {base} has no {path} (HTTP {code}): install the "
            "memory tools that come with it (`python -m service openwebui install`)",
            lasting=True,
        )
    if not 200 <= code < 300:
        raise _Failure(
            f"the memory service at {base} refused the request (HTTP {code}): {response.text[:300]}",
            lasting=True,
        )
    try:
        decoded = response.json()
    except ValueError as exc:
        raise _Failure(
            f"the memory service at {base} sent a damaged answer", lasting=False
        ) from exc
    if not isinstance(decoded, dict):
        raise _Failure(f"the memory service at {base} answered in another shape", lasting=True)
    return decoded


_TLS: list[ssl.SSLContext] = []


def _tls_context() -> ssl.SSLContext:
    """Built once: loading the CA bundle for every call would block the event loop."""
    if not _TLS:
        _TLS.append(httpx.create_ssl_context())
    return _TLS[0]


# --- small readers ---------------------------------------------------------------------------


async def _emit(emitter: Any, description: str) -> None:
    """Show a finished status line; a missing or failing emitter is ignored."""
    if not emitter or not description:
        return
    try:
        result = emitter({"type": "status", "data": {"description": description, "done": True}})
        if inspect.isawaitable(result):
            await result
    except Exception as exc:
        log.debug("status event not delivered: %r", exc)


async def _resolved(value: Any) -> Any:
    """Open WebUI's table methods are async in 0.12; accept plain values too."""
    if inspect.isawaitable(value):
        return await value
    return value


def _sender_of(user: Any) -> tuple[str, str | None, str | None] | None:
    if not isinstance(user, dict):
        return None
    user_id = user.get("id")
    if not isinstance(user_id, str) or not user_id.strip():
        return None
    name = user.get("name")
    zone = user.get("timezone")
    return (
        user_id,
        name.strip()[:255] if isinstance(name, str) and name.strip() else None,
        zone.strip() if isinstance(zone, str) and 0 < len(zone.strip()) <= 64 else None,
    )


def _is_admin(user: Any) -> bool:
    return isinstance(user, dict) and user.get("role") == "admin"


def _cut(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else str(value or "")
    return text[:limit]


def _short(value: Any) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= _STATUS_CHARS else text[: _STATUS_CHARS - 1] + "…"


def _id_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
