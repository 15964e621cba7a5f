"""
title: Remember this
author: Memory Banks contributors
version: 0.1.0
required_open_webui_version: 0.12.0
description: A "Remember this" button under each reply: the memory service keeps the message's facts for you (companion of the Memory Banks filter).
license: MIT
icon_url: data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAyNCAyNCIgZmlsbD0ibm9uZSIgc3Ryb2tlPSJibGFjayIgc3Ryb2tlLXdpZHRoPSIxLjUiIHN0cm9rZS1saW5lY2FwPSJyb3VuZCIgc3Ryb2tlLWxpbmVqb2luPSJyb3VuZCI+PHBhdGggZD0iTTYgM2gxMnYxOGwtNi00LTYgNHoiLz48cGF0aCBkPSJNOSA5aDYiLz48L3N2Zz4=
"""

import importlib
import inspect
import logging
import math
import re
import ssl
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

EventEmitter = Callable[[dict[str, Any]], Awaitable[None] | None]

#: The version of this file (as in its frontmatter); the service names its own in a header.
ACTION_VERSION = "0.1.0"
SERVICE_HEADER = "x-memory-service"
PATH = "/v1/memories/remember"
#: the service's MAX_MESSAGE_CHARS (service/core/limits.py); longer text keeps its end
MAX_SENT_CHARS = 32_000
_CUT_MARK = "… "
_CONTEXT_MESSAGES = 2
_MAX_FOLDER_DEPTH = 64
_EPOCH_MS_THRESHOLD = 1e12
_TEMPORARY_PREFIXES = ("temporary:", "local:")
# An assistant keeps its own memory when its workspace model carries this tag or the memory
# filter's `assistant_memory_models` valve names it (the filter's rule, read from its valves)
OWN_MEMORY_TAG = "own-memory"
FILTER_ID = "memory_filter"
_DETAILS_BLOCK = re.compile(r"<details\b[^>]*>.*?</details>", re.DOTALL | re.IGNORECASE)

WORKING = "Remembering…"
UNREACHABLE = (
    "Not remembered: the memory service is not reachable right now — try again in a moment"
)
SLOW = "Not remembered: the memory service did not answer in time — try again in a moment"
MISCONFIGURED = "Not remembered: memory is not set up correctly — please tell your admin"
#: admins see the exact cause after this
ADMIN_CAUSE = " · for the admin: "
NO_MESSAGE = "Not remembered: I could not find the message's text"
#: A click under a /memory answer (Open WebUI 0.12.4 shows an action under every reply of the
#: chat's model, and a command's answer is stored as that model's reply: it cannot be hidden
#: there) or on a command: nothing is sent, nothing stored.
COMMAND_ANSWER = (
    "Not remembered: this is a /memory command or its answer, not something said in the "
    "chat — to keep a fact, type `/memory add <fact>`"
)
_COMMAND_WORDS = ("/memory", "/memories")
NO_USER = "Not remembered: I could not tell who clicked"
NOT_YOURS = "Not remembered: you cannot write in this chat"
UNCHECKED = "Not remembered: I could not check that you may use this chat — try again in a moment"


class Action:
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
            default=30.0,
            gt=0,
            description="Seconds to wait for the service (it may ask its LLM for the facts).",
        )

    def __init__(self) -> None:
        self.valves = self.Valves()

    async def action(
        self,
        body: dict[str, Any],
        __user__: dict[str, Any] | None = None,
        __event_emitter__: EventEmitter | None = None,
        __event_call__: Any = None,
        __request__: Any = None,
        __model__: Any = None,
    ) -> dict[str, str]:
        """Store the clicked message's facts for the clicking user; one status line says
        what was stored (and its ids) or why nothing was. Never raises.

        Open WebUI 0.12.4 posts `{model, messages: [{id, role, content, timestamp}, …],
        chat_id, session_id, id}` to `/api/chat/actions/{id}`: `id` is the clicked message
        and `messages` the branch up to it.

        Returns:
            `{"status_line": <the line shown>}`: Open WebUI answers it to the caller (the
            browser ignores it; `python -m service openwebui status` reads it).
        """
        try:
            line = await _remember(body, self.valves, __user__, __model__)
        except Exception as exc:  # an action must never break the chat
            log.exception("remember action failed")
            line = MISCONFIGURED + (ADMIN_CAUSE + repr(exc) if _is_admin(__user__) else "")
        await _emit(__event_emitter__, line, done=True)
        return {"status_line": line}


async def _remember(body: Any, valves: Action.Valves, user: Any, model: Any = None) -> str:
    body = body if isinstance(body, dict) else {}
    sender = _sender_of(user)
    if sender is None:
        return NO_USER
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    index = _clicked(messages, body.get("id"))
    if index is None:
        return NO_MESSAGE
    clicked = messages[index]
    if _is_command_turn(messages, index):
        return COMMAND_ANSWER
    role = "assistant" if clicked.get("role") == "assistant" else "user"
    content = _text(clicked.get("content"), role)
    message_id = clicked.get("id") or body.get("id")
    if not content.strip() or not isinstance(message_id, str) or not message_id:
        return NO_MESSAGE
    chat_id = body.get("chat_id") if isinstance(body.get("chat_id"), str) else ""
    kind = _kind(chat_id)
    refused = await _chat_access_refusal(kind, chat_id, user)
    if refused is not None:
        return refused
    chat, author_id = await _chat_context(kind, chat_id, sender, message_id)
    assistant = await _assistant_of(body.get("model"), model)
    if assistant is not None:  # the chat's facts belong to that assistant's memory only
        chat["assistant_id"], chat["assistant_name"] = assistant
    payload: dict[str, Any] = {
        "chat": chat,
        "message_id": message_id[:255],
        "role": role,
        "content": _shortened(content),
        "author_id": author_id,
        "context": _context(messages[:index]),
    }
    occurred = _iso_time(clicked.get("timestamp"))
    if occurred is not None:
        payload["occurred_at"] = occurred
    try:
        response = await _post(valves, payload)
    except _Failure as failure:
        log.warning("remember: %s", failure.detail)
        cause = ADMIN_CAUSE + failure.detail if _is_admin(user) else ""
        return failure.line + cause
    text = _answer_text(response)
    if text is None:
        cause = ADMIN_CAUSE + "the service's answer has no text" if _is_admin(user) else ""
        return MISCONFIGURED + cause
    return text


def _clicked(messages: list[dict[str, Any]], message_id: Any) -> int | None:
    """Index of the clicked message (by id), else the last one; None when there is none."""
    for i, message in enumerate(messages):
        if message_id is not None and message.get("id") == message_id:
            return i
    return len(messages) - 1 if messages else None


def _is_command_turn(messages: list[dict[str, Any]], index: int) -> bool:
    """True when the clicked message is a /memory command (or a mistyped one) or the reply
    to one: the nearest user message at or before it (the memory filter's rule).
    """
    for message in reversed(messages[: index + 1]):
        if message.get("role") == "user":
            return _is_command_or_typo(_text(message.get("content"), "user"))
    return False


def _is_command_or_typo(text: str) -> bool:
    words = text.strip().split(maxsplit=1)
    head = words[0].lower() if words else ""
    return head.startswith("/") and any(_one_edit(head, word) for word in _COMMAND_WORDS)


def _one_edit(a: str, b: str) -> bool:
    """`a` equals `b`, or one insertion, deletion, substitution or swap of neighbours away."""
    if a == b:
        return True
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    if len(long) - len(short) != 1:
        return False
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _kind(chat_id: str) -> str:
    if not chat_id:
        return "api"
    if chat_id.startswith(_TEMPORARY_PREFIXES):
        return "temporary"
    if chat_id.startswith("channel:"):
        return "channel"
    return "saved"


def _context(earlier: list[dict[str, Any]]) -> list[dict[str, str]]:
    kept: list[dict[str, str]] = []
    for message in reversed(earlier):
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        text = _text(message.get("content"), role)
        if text.strip():
            kept.append({"role": role, "content": _shortened(text)})
        if len(kept) == _CONTEXT_MESSAGES:
            break
    kept.reverse()
    return kept


# --- who wrote it, and who can see it (DESIGN §2, §3) ---------------------------------------


async def _chat_access_refusal(kind: str, chat_id: str, user: Any) -> str | None:
    """The status line when the clicking user may not write in this saved chat, else None.

    The chat id comes with the request, so it is checked with Open WebUI's own rule for
    writing in a chat (0.12.4 `Chats.get_accessible_chat_by_id(..., permission="write")`:
    the owner, a chat shared to continue, a folder shared to continue; an admin's right to
    read others' chats is no right to write there); before that method, the owner only
    (`Chats.is_chat_owner`). Outside Open WebUI there is nothing to ask (the service checks
    the chat's owner too); a failed lookup refuses.
    """
    if kind != "saved" or not _open_webui_present():
        return None
    try:
        chats = importlib.import_module("open_webui.models.chats").Chats
        users = importlib.import_module("open_webui.models.users").Users
        account = await _resolved(users.get_user_by_id(user["id"]))
        if account is None:
            return NOT_YOURS
        if hasattr(chats, "get_accessible_chat_by_id"):
            found = await _resolved(
                chats.get_accessible_chat_by_id(chat_id, account, permission="write")
            )
            allowed = found is not None
        else:
            allowed = bool(await _resolved(chats.is_chat_owner(chat_id, account.id)))
    except Exception as exc:
        log.warning("chat access check failed, not remembering: %r", exc)
        return UNCHECKED
    return None if allowed else NOT_YOURS


async def _chat_context(
    kind: str, chat_id: str, sender: tuple[str, str | None, str | None], message_id: str
) -> tuple[dict[str, Any], str | None]:
    """The chat object of the HTTP contract, and the message's author (None: unknown).

    Inside Open WebUI a saved chat is looked up: its owner, folder, shares and the user id
    Open WebUI keeps on each message. A failed lookup counts as shared and the author as
    unknown, so nothing is ever stored as the clicker's Personal memory by mistake. A
    temporary chat has only its one user.
    """
    user_id, user_name, timezone = sender
    chat: dict[str, Any] = {"user_id": user_id, "chat_id": chat_id, "kind": kind}
    if user_name:
        chat["user_name"] = user_name
    if timezone:
        chat["timezone"] = timezone
    folder_id: str | None = None
    reason: str | None = "channel" if kind == "channel" else None
    author: str | None = user_id if kind == "temporary" else None
    if kind == "saved" and _open_webui_present():
        folder_id, reason, author = await _saved_chat_facts(chat_id, user_id, message_id)
        folder_id = await _folder_of_member(folder_id, user_id)
    chat.update(
        {
            "folder_id": folder_id,
            "collaborative": reason is not None,
            "collaborative_reason": reason,
        }
    )
    return chat, author


async def _saved_chat_facts(
    chat_id: str, user_id: str, message_id: str
) -> tuple[str | None, str | None, str | None]:
    """(folder id, collaborative reason, author) of a saved chat's message."""
    try:
        chats = importlib.import_module("open_webui.models.chats").Chats
        row = await _resolved(chats.get_chat_by_id(chat_id))
        if row is None:
            raise LookupError("chat not found")
    except Exception as exc:
        log.warning("chat lookup failed, treating the chat as shared: %r", exc)
        return None, "lookup_failed", None
    folder_id = _id_or_none(_field(row, "folder_id"))
    owner = _field(row, "user_id")
    author = _author(_field(row, "chat"), message_id, owner)
    if owner != user_id:
        return folder_id, "sender_not_owner", author
    try:
        if await _shared_to_continue(chat_id):
            return folder_id, "chat_shared", author
        if folder_id is not None and await _folder_is_shared(folder_id, owner):
            return folder_id, "folder_shared", author
    except Exception as exc:
        log.warning("share or folder lookup failed, treating the chat as shared: %r", exc)
        return folder_id, "lookup_failed", author
    return folder_id, None, author


def _author(chat_json: Any, message_id: str, owner: Any) -> str | None:
    """Whose message it is: its `user_id` in the chat's history (a reply carries the user
    whose turn it answers), else its parent's; the owner for history without user ids (a
    chat only its owner ever wrote in); None when the message is not found.
    """
    history = chat_json.get("history") if isinstance(chat_json, dict) else None
    found = history.get("messages") if isinstance(history, dict) else None
    if not isinstance(found, dict):
        return None
    message = found.get(message_id)
    for _ in range(2):
        if not isinstance(message, dict):
            return None
        author = message.get("user_id")
        if isinstance(author, str) and author:
            return author
        if message.get("role") == "user" or "parentId" not in message:
            break
        message = found.get(message.get("parentId"))
    return owner if isinstance(owner, str) and owner else None


async def _folder_of_member(folder_id: str | None, user_id: str) -> str | None:
    """`folder_id` when `user_id` may open that folder now (Open WebUI's own check)."""
    if folder_id is None:
        return None
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


async def _assistant_of(model_id: Any, model: Any) -> tuple[str, str] | None:
    """(id, name) of the chat's model when it keeps its own memory (tagged OWN_MEMORY_TAG, or
    named in the memory filter's `assistant_memory_models` valve), else None.
    """
    if not isinstance(model_id, str) or not model_id.strip() or len(model_id) > 200:
        return None
    details: dict[str, Any] = (
        model if isinstance(model, dict) and model.get("id") == model_id else {}
    )
    info = details.get("info")
    meta = info.get("meta") if isinstance(info, dict) else None
    tags = meta.get("tags") if isinstance(meta, dict) else None
    if not isinstance(tags, list):
        tags = []
    tagged = any(
        isinstance(tag, dict) and str(tag.get("name", "")).strip().lower() == OWN_MEMORY_TAG
        for tag in tags
    )
    if not tagged and not _named_in(model_id, await _filter_assistant_patterns()):
        return None
    name = details.get("name")
    name = name.strip()[:255] if isinstance(name, str) and name.strip() else model_id
    return model_id, name


async def _filter_assistant_patterns() -> str:
    """The memory filter's `assistant_memory_models` valve ("" outside Open WebUI or unset)."""
    if not _open_webui_present():
        return ""
    try:
        functions = importlib.import_module("open_webui.models.functions").Functions
        valves = await _resolved(functions.get_function_valves_by_id(FILTER_ID))
    except Exception as exc:
        log.warning("could not read the memory filter's valves: %r", exc)
        return ""
    value = valves.get("assistant_memory_models") if isinstance(valves, dict) else None
    return value if isinstance(value, str) else ""


def _named_in(model_id: str, patterns: str) -> bool:
    """True when `model_id` matches one of the comma-separated ids or `prefix*` patterns."""
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
    def __init__(self, line: str, detail: str) -> None:
        super().__init__(detail)
        self.line = line
        self.detail = detail


async def _post(valves: Action.Valves, payload: dict[str, Any]) -> httpx.Response:
    """POST the click; a _Failure says in one line what went wrong (and the cause)."""
    headers = {"Accept": "application/json"}
    if valves.api_key:
        headers["Authorization"] = f"Bearer {valves.api_key}"
    base = valves.service_url.rstrip("/")
    try:
        # trust_env=False: the service is addressed directly, never through an HTTP proxy
        async with httpx.AsyncClient(
            timeout=valves.timeout_s, verify=_tls_context(), trust_env=False
        ) as client:
            response = await client.post(base + PATH, json=payload, headers=headers)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise _Failure(
            MISCONFIGURED, f"the service_url valve ({base!r}) is not an http(s) address: {exc}"
        ) from exc
    except httpx.TimeoutException as exc:
        raise _Failure(SLOW, f"{base} did not answer within {valves.timeout_s:g} s") from exc
    except httpx.HTTPError as exc:
        raise _Failure(UNREACHABLE, f"cannot reach the memory service at {base} ({exc!r})") from exc
    code = response.status_code
    if 200 <= code < 300:
        return response
    version = response.headers.get(SERVICE_HEADER)
    if code >= 500:
        raise _Failure(UNREACHABLE, f"the memory service at {base} failed (HTTP {code})")
    if version is None:
        raise _Failure(
            MISCONFIGURED,
            f"{base} answered HTTP {code} but is not the memory service: check the service_url valve",
        )
    if code == 403:  # the service's own check: another user's private chat
        raise _Failure(NOT_YOURS, f"the memory service at {base} refused this chat (HTTP 403)")
    if code == 401:
        raise _Failure(
            MISCONFIGURED, f"the memory service at {base} refused the api_key valve (HTTP {code})"
        )
    if code in (404, 405):
        wrong_path = _wrong_path_hint(base)
        if wrong_path:
            raise _Failure(MISCONFIGURED, f"{base} has no {PATH} (HTTP {code}): {wrong_path}")
        raise _Failure(
            MISCONFIGURED,
            f"the memory service {version} at {base} has no {PATH} (HTTP {code}): install the action that comes with it",
        )
    raise _Failure(
        MISCONFIGURED,
        f"the memory service at {base} refused the request (HTTP {code}): {response.text[:300]}",
    )


def _wrong_path_hint(base: str) -> str | None:
    """Why a service_url with a path (`…/v1`) finds no route, else None: every route of the
    service sits under `/v1` of its bare address, so a path is not a version mismatch.
    """
    parts = urlsplit(base)
    extra = parts.path.rstrip("/")
    if not extra:
        return None
    root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    hint = "should not end in /v1" if extra.lower().endswith("/v1") else "should have no path"
    return f"the service_url valve {hint}; set it to {root} (the service's address and port)"


def _answer_text(response: httpx.Response) -> str | None:
    try:
        answer = response.json()
    except ValueError:
        return None
    text = answer.get("text") if isinstance(answer, dict) else None
    return text if isinstance(text, str) and text.strip() else None


_TLS: list[ssl.SSLContext] = []


def _tls_context() -> ssl.SSLContext:
    """Built once: loading the CA bundle for every click would block the event loop."""
    if not _TLS:
        _TLS.append(httpx.create_ssl_context())
    return _TLS[0]


# --- small readers ---------------------------------------------------------------------------


async def _emit(emitter: EventEmitter | None, description: str, *, done: bool) -> None:
    if not emitter:
        return
    try:
        result = emitter({"type": "status", "data": {"description": description, "done": done}})
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
        name if isinstance(name, str) and name.strip() else None,
        zone.strip() if isinstance(zone, str) and 0 < len(zone.strip()) <= 64 else None,
    )


def _is_admin(user: Any) -> bool:
    return isinstance(user, dict) and user.get("role") == "admin"


def _text(content: Any, role: Any) -> str:
    """The text parts of a message; an assistant's reasoning and tool blocks left out."""
    if isinstance(content, list):
        content = "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    if not isinstance(content, str):
        return ""
    return _DETAILS_BLOCK.sub("", content).strip() if role == "assistant" else content


def _shortened(text: str) -> str:
    if len(text) <= MAX_SENT_CHARS:
        return text
    return _CUT_MARK + text[len(text) - MAX_SENT_CHARS + len(_CUT_MARK) :]


def _iso_time(value: Any) -> str | None:
    """Epoch seconds (or milliseconds) as ISO 8601 UTC; None when unusable."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    seconds = value / 1000 if value > _EPOCH_MS_THRESHOLD else value
    try:
        moment = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _id_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)
