"""
title: Memory Banks
author: Memory Banks contributors
version: 0.1.0
required_open_webui_version: 0.12.0
description: Long-term memory for Open WebUI. Recalls what the memory service knows before each reply and hands every finished turn to it.
license: MIT
"""

import asyncio
import functools
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
from pydantic import BaseModel, Field, ValidationError

log = logging.getLogger(__name__)

EventEmitter = Callable[[dict[str, Any]], Awaitable[None] | None]

STATUS_UNAVAILABLE = "Memory unavailable — answering without it"
STATUS_NOT_SAVED = "Memory could not save this turn"
#: Shown to an ordinary user once a day while the connection is misconfigured (retrying
#: cannot help; only an admin can fix the valves). It says what is wrong, not that someone
#: switched memory off.
STATUS_MISCONFIGURED = (
    "Memory is not set up correctly, so I am answering without it — please tell your admin"
)
#: Admins see the exact cause on every turn, after this prefix.
STATUS_MISCONFIGURED_ADMIN = "Memory misconfigured — "
STATUS_SEPARATOR = " · "
#: The version of this file (as in its frontmatter); the service names its own in a header.
FILTER_VERSION = "0.1.0"
#: Every answer of the memory service carries this header with the service's version.
SERVICE_HEADER = "x-memory-service"

# Longest text sent to the service in one field: its MAX_MESSAGE_CHARS
# (service/core/limits.py). Longer messages are shortened, keeping their end.
MAX_SENT_CHARS = 32_000
_CUT_MARK = "… "

_AUTOMATED_SESSION_PREFIXES = ("automation:", "subagent:", "timer:")
_TEMPORARY_CHAT_PREFIXES = ("temporary:", "local:")
_CHANNEL_CHAT_PREFIX = "channel:"
_KINDS_WITHOUT_MEMORY = frozenset({"task", "automated", "api"})
_KINDS_WITHOUT_COMMANDS = frozenset({"task", "automated"})
_COMMAND_WORDS = ("/memory", "/memories")
COMMAND_METADATA_KEY = "memory_command"
#: Where the inlet leaves its decision about Assistant Memory for the outlet of the same turn
#: (`__metadata__` is one live dict from inlet to the inline outlet, CONTRACT §2): an admin
#: who marks or unmarks the model while the model answers changes the next turn, not this one.
ASSISTANT_METADATA_KEY = "memory_assistant"
#: A workspace model with this tag keeps its own memory (Assistant Memory, DESIGN §3).
OWN_MEMORY_TAG = "own-memory"
COMMAND_UNAVAILABLE = (
    "The memory service is not reachable right now, so this /memory command did not run. "
    "Please try again in a moment."
)
COMMAND_MISCONFIGURED = (
    "Memory is not set up correctly, so this /memory command did not run. Trying again "
    "will not help: please tell your admin."
)
#: Opens the cause an admin is shown under COMMAND_MISCONFIGURED or COMMAND_UNAVAILABLE.
COMMAND_CAUSE_PREFIX = "For the admin: "
COMMAND_TYPO = (
    "Did you mean `/memory{rest}`? Memory commands start with `/memory`; "
    "`/memory help` lists them. Nothing was sent to the model."
)
_HISTORY_MESSAGES = 6
_MAX_FOLDER_DEPTH = 64
_EPOCH_MS_THRESHOLD = 1e12
# A message time outside these bounds is a broken clock: the service would date the memory by
# the turn's arrival anyway (service/core/message_time.py), and one beyond ten years ahead
# would get the whole turn refused (422), so the filter passes the next stamp on instead.
_EARLIEST_MESSAGE = datetime(2000, 1, 1, tzinfo=UTC)
_MESSAGE_AHEAD_S = 86_400
# Reasoning and tool-call blocks that Open WebUI keeps inside an assistant's content.
_DETAILS_BLOCK = re.compile(r"<details\b[^>]*>.*?</details>", re.DOTALL | re.IGNORECASE)


class Filter:
    class Valves(BaseModel):
        priority: int = Field(
            default=0,
            description="Order among filters; lower runs first.",
        )
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
        inlet_timeout_s: float = Field(
            default=0.8,
            gt=0,
            description="Seconds to wait for memories before answering without them.",
        )
        outlet_timeout_s: float = Field(
            default=2.0,
            gt=0,
            description="Seconds to wait while handing a finished turn to the service.",
        )
        budget_tokens: int = Field(
            default=400,
            description="Most tokens of memory to add to the system message.",
        )
        disable_native_memory: bool = Field(
            default=True,
            description="Switch off Open WebUI's built-in memory on turns this filter handles.",
        )
        read_in_temporary_chats: bool = Field(
            default=True,
            description="Recall memories in temporary chats (they are never written).",
        )
        no_memory_models: str = Field(
            default="",
            description=(
                "Comma-separated model ids (a trailing * matches a prefix) that never receive "
                "memories, e.g. models served by external providers."
            ),
        )
        assistant_memory_models: str = Field(
            default="",
            description=(
                "Comma-separated model ids (a trailing * matches a prefix) of assistants "
                "that keep their own memory: chats with them read and write only each "
                "user's memory for that assistant, never Personal, Interaction Patterns, "
                f"Project or Chat Memory. A workspace model tagged `{OWN_MEMORY_TAG}` "
                "counts too."
            ),
        )
        commands_model_id: str = Field(
            default="memory_commands",
            description="Id of the Memory Commands pipe that shows /memory answers verbatim.",
        )
        command_timeout_s: float = Field(
            default=5.0,
            gt=0,
            description="Seconds to wait for the answer to a /memory command.",
        )

    class UserValves(BaseModel):
        enabled: bool = Field(
            default=True,
            description="Use long-term memory in my chats.",
        )
        show_status: bool = Field(
            default=True,
            description="Show a status line when memories are recalled or unavailable.",
        )

    def __init__(self) -> None:
        self.valves = self.Valves()
        guard_task_transcripts()

    async def inlet(
        self,
        body: dict[str, Any],
        __user__: dict[str, Any] | None = None,
        __metadata__: dict[str, Any] | None = None,
        __event_emitter__: EventEmitter | None = None,
        __chat_id__: str | None = None,
        __message_id__: str | None = None,
        __request__: Any = None,
        __model__: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Add the service's memory block to the system message; never fail the turn."""
        guard_task_transcripts()
        try:
            await _recall_into(
                body,
                valves=self.valves,
                user=__user__,
                metadata=_metadata_of(body, __metadata__),
                chat_id=__chat_id__,
                emitter=__event_emitter__,
                user_valves_model=self.UserValves,
                model=__model__,
            )
        except Exception:
            log.exception("memory inlet failed; answering without memory")
        return body

    async def outlet(
        self,
        body: dict[str, Any],
        __user__: dict[str, Any] | None = None,
        __metadata__: dict[str, Any] | None = None,
        __event_emitter__: EventEmitter | None = None,
        __request__: Any = None,
        __model__: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Hand the finished turn to the service; the body is returned unchanged."""
        try:
            metadata = __metadata__ if isinstance(__metadata__, dict) else {}
            await _hand_over_turn(
                body,
                valves=self.valves,
                user=__user__,
                metadata=metadata,
                emitter=__event_emitter__,
                user_valves_model=self.UserValves,
                assistant=_turn_assistant(body, __model__, metadata, self.valves),
            )
        except Exception:
            log.exception("memory outlet failed; turn not saved")
        return body


def classify_chat(chat_id: Any, metadata: dict[str, Any] | None) -> str:
    """Return the turn's kind: task, automated, temporary, channel, api or saved (DESIGN §2)."""
    meta = metadata if isinstance(metadata, dict) else {}
    if meta.get("task"):
        return "task"
    session_id = meta.get("session_id")
    if (
        (isinstance(session_id, str) and session_id.startswith(_AUTOMATED_SESSION_PREFIXES))
        or meta.get("internal")
        or meta.get("automation_id")
    ):
        return "automated"
    chat = chat_id.strip() if isinstance(chat_id, str) else ""
    if chat.startswith(_TEMPORARY_CHAT_PREFIXES):
        return "temporary"
    if chat.startswith(_CHANNEL_CHAT_PREFIX):
        return "channel"
    if not chat:
        return "api"
    return "saved"


# --- inlet -----------------------------------------------------------------------------------


async def _recall_into(
    body: dict[str, Any],
    *,
    valves: Filter.Valves,
    user: dict[str, Any] | None,
    metadata: dict[str, Any],
    chat_id: str | None,
    emitter: EventEmitter | None,
    user_valves_model: type[Filter.UserValves],
    model: Any = None,
) -> None:
    """Run the inlet: classify, switch native memory off, fetch and inject the block."""
    chat_id = chat_id if isinstance(chat_id, str) and chat_id else metadata.get("chat_id")
    kind = classify_chat(chat_id, metadata)
    if kind == "task":
        _strip_task_request(body)
        return
    sender = _sender_of(user)
    if kind in _KINDS_WITHOUT_COMMANDS or sender is None:
        return
    # after the task check: a task request's body stays byte for byte as it came
    assistant = _decide_assistant(body, model, metadata, valves)
    text = _last_user_text(body.get("messages"))
    if is_memory_command(text):
        await _route_command(
            body,
            text,
            valves=valves,
            kind=kind,
            chat_id=chat_id,
            sender=sender,
            metadata=metadata,
            is_admin=_is_admin(user),
            assistant=assistant,
        )
        return
    typo = command_typo_hint(text)
    if typo is not None:  # answered by the pipe: no model, no service, no extraction
        _answer_with_pipe(body, metadata, valves, typo)
        return
    _drop_command_turns(body)
    if kind in _KINDS_WITHOUT_MEMORY:
        return
    user_valves = _read_user_valves(user, user_valves_model)
    if not user_valves.enabled:
        return
    if valves.disable_native_memory or assistant:
        # Open WebUI's own memories are the user's personal ones: an assistant with its own
        # memory never gets them, whatever the valve says
        _disable_native_memory(body)
    if kind == "temporary" and not valves.read_in_temporary_chats:
        return
    if _model_excluded(body.get("model"), valves.no_memory_models):
        return  # an admin keeps memories away from this model (e.g. an external provider)
    await _fetch_and_inject(
        body,
        _context_request(text, valves, metadata),
        valves=valves,
        user=user,
        user_valves=user_valves,
        kind=kind,
        chat_id=chat_id,
        sender=sender,
        metadata=metadata,
        assistant=assistant,
        emitter=emitter,
    )


def _context_request(text: str, valves: Filter.Valves, metadata: dict[str, Any]) -> dict[str, Any]:
    """The body of POST /v1/context for the user's message (`now` and its id when known)."""
    request_body: dict[str, Any] = {
        "message": _shortened(text),
        "budget_tokens": valves.budget_tokens,
    }
    now = _iso_time(_dict_of(metadata.get("user_message")).get("timestamp"))
    if now is not None:
        request_body["now"] = now
    message_id = _user_message_id(metadata)
    if message_id is not None:
        request_body["user_message_id"] = message_id
    return request_body


async def _fetch_and_inject(
    body: dict[str, Any],
    request_body: dict[str, Any],
    *,
    valves: Filter.Valves,
    user: dict[str, Any] | None,
    user_valves: Filter.UserValves,
    kind: str,
    chat_id: Any,
    sender: tuple[str, str | None, str | None],
    metadata: dict[str, Any],
    assistant: dict[str, str] | None,
    emitter: EventEmitter | None,
) -> None:
    """Ask the service for the memory block, put it into `body`, show the status line."""
    try:
        response = await asyncio.wait_for(
            _post_for_chat(
                valves,
                "/v1/context",
                request_body,
                timeout_s=valves.inlet_timeout_s,
                kind=kind,
                chat_id=chat_id,
                sender=sender,
                metadata=metadata,
                assistant=assistant,
            ),
            timeout=valves.inlet_timeout_s,
        )
        answer = _read_answer(response, valves, lambda decoded: decoded)
        block, memory_count = _read_answer(response, valves, _parse_context_answer)
    except Exception as exc:
        failure = _as_failure(exc, valves, timeout_s=valves.inlet_timeout_s)
        log.warning("memory service gave no context: %s", failure.detail)
        if user_valves.show_status:
            line = _failure_status(failure, user, sender[0], day=_day_of(metadata))
            _remember_inlet_status(sender[0], chat_id, line)
            if line:
                await _emit_status(emitter, line)
        return
    if not block.strip():
        return
    _inject_block(body, block)
    if user_valves.show_status:
        lines = []
        if memory_count or not _notice_in(answer):
            lines.append(_recalled_status(memory_count))
        notice = _notice_in(answer)
        if notice:
            lines.append(notice)
        _remember_inlet_status(sender[0], chat_id, STATUS_SEPARATOR.join(lines))
        for line in lines:
            await _emit_status(emitter, line)


def _model_excluded(model_id: Any, patterns: str) -> bool:
    """True when `model_id` matches one of the comma-separated ids or `prefix*` patterns."""
    if not isinstance(model_id, str) or not patterns.strip():
        return False
    for pattern in (p.strip() for p in patterns.split(",")):
        if pattern and (
            model_id == pattern or (pattern.endswith("*") and model_id.startswith(pattern[:-1]))
        ):
            return True
    return False


def is_memory_command(text: str) -> bool:
    """True when the message is a `/memory …` command."""
    words = text.strip().split(maxsplit=1)
    return bool(words) and words[0].lower() in _COMMAND_WORDS


async def _route_command(
    body: dict[str, Any],
    text: str,
    *,
    valves: Filter.Valves,
    kind: str,
    chat_id: Any,
    sender: tuple[str, str | None, str | None],
    metadata: dict[str, Any],
    is_admin: bool = False,
    assistant: dict[str, str] | None = None,
) -> None:
    """Run a /memory command and hand the turn to the Memory Commands pipe.

    The pipe returns the stashed text verbatim, so the user sees the exact answer and no LLM
    is called (Open WebUI gives filters no other way to answer a turn themselves).
    """
    command: dict[str, Any] = {"command": text[:4000]}
    path = "/v1/commands"
    if _is_openwebui_import(text):
        owui = await _openwebui_memories(sender[0])
        if owui is not None:
            path, command = "/v1/imports/openwebui", {"memories": owui}
            if text.split()[3:]:  # `… openwebui forgotten`: those forgotten here too
                command["include_forgotten"] = True
    now = _iso_time(_dict_of(metadata.get("user_message")).get("timestamp"))
    if now is not None:
        command["now"] = now
    try:
        response = await asyncio.wait_for(
            _post_for_chat(
                valves,
                path,
                command,
                timeout_s=valves.command_timeout_s,
                kind=kind,
                chat_id=chat_id,
                sender=sender,
                metadata=metadata,
                assistant=assistant,
            ),
            timeout=valves.command_timeout_s,
        )
        answer = _read_answer(response, valves, _command_text)
    except Exception as exc:
        failure = _as_failure(exc, valves, timeout_s=valves.command_timeout_s)
        log.warning("memory command failed: %s", failure.detail)
        answer = COMMAND_MISCONFIGURED if failure.lasting else COMMAND_UNAVAILABLE
        if is_admin:
            answer += "\n\n" + COMMAND_CAUSE_PREFIX + failure.detail
    _answer_with_pipe(body, metadata, valves, answer)


def _answer_with_pipe(
    body: dict[str, Any], metadata: dict[str, Any], valves: Filter.Valves, answer: str
) -> None:
    """Reroute the turn to the Memory Commands pipe, which shows `answer` verbatim."""
    metadata[COMMAND_METADATA_KEY] = {"text": answer}
    if isinstance(body.get("metadata"), dict):
        body["metadata"][COMMAND_METADATA_KEY] = {"text": answer}
    body["model"] = valves.commands_model_id


def _is_openwebui_import(text: str) -> bool:
    """True for `/memory import openwebui` and `/memory import openwebui forgotten` (any
    case, any spacing).
    """
    words = [w.lower() for w in text.split()[1:]]
    return words in (["import", "openwebui"], ["import", "openwebui", "forgotten"])


async def _openwebui_memories(user_id: str) -> list[dict[str, Any]] | None:
    """The sender's own memories of Open WebUI's built-in Memory feature, read in-process
    (Open WebUI's REST API lets each user read only their own, and an admin nobody else's);
    None outside Open WebUI or when the lookup fails (the service then says why).
    """
    if not _open_webui_present():
        return None
    try:
        table = importlib.import_module("open_webui.models.memories").Memories
        rows = await _resolved(table.get_memories_by_user_id(user_id))
    except Exception as exc:
        log.warning("reading Open WebUI memories failed: %r", exc)
        return None
    return [
        {
            "id": str(_field(row, "id")),
            "content": str(_field(row, "content") or ""),
            "created_at": _field(row, "created_at") or 0,
            "updated_at": _field(row, "updated_at"),
        }
        for row in rows or []
    ]


def _drop_command_turns(body: dict[str, Any]) -> None:
    """Remove earlier /memory commands and their answers from what the model will read."""
    messages = body.get("messages")
    if not isinstance(messages, list) or len(messages) < 2:
        return
    kept: list[Any] = []
    skip_reply = False
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        last = index == len(messages) - 1
        if skip_reply and role == "assistant":
            skip_reply = False
            continue
        skip_reply = False
        if role == "user" and not last and _is_command_or_typo(_text_of(message.get("content"))):
            skip_reply = True
            continue
        kept.append(message)
    if len(kept) != len(messages):
        messages[:] = kept


def _parse_context_answer(answer: Any) -> tuple[str, int]:
    """Return (block, number of memories) from a /v1/context answer; raise on a bad shape."""
    if not isinstance(answer, dict):
        raise ValueError("context answer is not a JSON object")
    block = answer.get("block")
    if not isinstance(block, str):
        raise ValueError("context answer has no text block")
    memories = answer.get("memories", [])
    if memories is None:
        memories = []
    if not isinstance(memories, list):
        raise ValueError("context answer has a malformed memories list")
    return block, len(memories)


def _inject_block(body: dict[str, Any], block: str) -> None:
    """Append the block to the first system message, or insert one at the top."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "system":
            content = message.get("content")
            if isinstance(content, list):
                message["content"] = [*content, {"type": "text", "text": block}]
            elif isinstance(content, str) and content:
                message["content"] = content + "\n\n" + block
            else:
                message["content"] = block
            return
    messages.insert(0, {"role": "system", "content": block})


def _disable_native_memory(body: dict[str, Any]) -> None:
    """Turn off Open WebUI's own memory injection and tools for this turn (CONTRACT §4)."""
    features = body.get("features")
    if not isinstance(features, dict):
        features = {}
        body["features"] = features
    features["memory"] = False


def _recalled_status(memory_count: int) -> str:
    if memory_count > 0:
        return f"Recalled {counted(memory_count, 'memory', 'memories')}"
    return "Recalled what I know about you"


def counted(count: int, singular: str, plural: str) -> str:
    """`1 memory`, `2 memories`, `0 memories`: every count this file shows is phrased here
    (the service's twin is service/core/commands.py `counted`; a filter file stands alone).
    """
    return f"{count} {singular if count == 1 else plural}"


# --- background tasks ------------------------------------------------------------------------

#: Where Open WebUI 0.12 renders a chat's transcript into the prompt of a background task
#: (title, tags, follow-ups, queries, autocomplete, context compaction). Filters do not run on
#: task requests (CONTRACT §2b), so the filter wraps these functions, looked up as module
#: globals at call time: (module, function, position of the messages argument).
_TASK_TRANSCRIPT_HOOKS = (
    ("open_webui.utils.task", "replace_messages_variable", 1),
    ("open_webui.utils.task", "get_last_user_message", 0),
    ("open_webui.utils.context_compaction", "replace_messages_variable", 1),
    ("open_webui.utils.context_compaction", "get_last_user_message", 0),
)
#: First line of each part of the block the service renders (service/core/ranking.py
#: render_block); the filter always appends the block last, so a system message is cut there.
MEMORY_BLOCK_OPENERS = ("<userMemories>", "I recall the following about you:")


def guard_task_transcripts() -> int:
    """Wrap Open WebUI's task-prompt helpers so tasks never see memories; return how many.

    Idempotent: a wrapper from this very filter module is left alone; one from an earlier load
    of the filter is replaced (the original is kept on `__memory_banks_original__`). Never
    raises: without Open WebUI, or with other helper names, nothing is wrapped.
    """
    wrapped = 0
    for module_name, name, position in _TASK_TRANSCRIPT_HOOKS:
        try:
            module = importlib.import_module(module_name)
        except Exception:
            continue
        current = getattr(module, name, None)
        if not callable(current):
            continue
        if getattr(current, "__memory_banks_guard__", None) is not _guarded_transcript:
            original = getattr(current, "__memory_banks_original__", current)
            setattr(module, name, _guarded_transcript(original, position))
        wrapped += 1
    return wrapped


def _guarded_transcript(original: Callable[..., Any], position: int) -> Callable[..., Any]:
    """`original` called with its messages argument passed through task_transcript."""

    @functools.wraps(original)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        arguments = list(args)
        if len(arguments) > position:
            messages = arguments[position]
            arguments[position] = task_transcript(messages)
        else:
            messages = kwargs.get("messages")
            if "messages" in kwargs:
                kwargs["messages"] = task_transcript(messages)
        result = original(*arguments, **kwargs)
        if result is None and original.__name__ == "get_last_user_message" and messages:
            return ""  # `{{prompt}}` of a chat that held only commands: empty, not an error
        return result

    guarded.__memory_banks_guard__ = _guarded_transcript  # type: ignore[attr-defined]
    guarded.__memory_banks_original__ = original  # type: ignore[attr-defined]
    return guarded


def task_transcript(messages: Any) -> Any:
    """A copy of `messages` without /memory turns, their answers and the memory block.

    Every user message that is a /memory command, or a mistyped one (`/memroy list`, which
    the pipe answers with COMMAND_TYPO), is dropped together with the assistant and tool
    messages that answer it: so the typo's "Nothing was sent to the model" stays true for
    the follow-up, title and tag tasks too. System messages lose the block this filter
    appended (and are dropped when nothing else is left). Anything but a list is returned
    as is.
    """
    if not isinstance(messages, list):
        return messages
    kept: list[Any] = []
    in_command = False
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role == "user":
            in_command = _is_command_or_typo(_text_of(message.get("content")))
        if in_command:
            continue
        if role == "system":
            message = _without_memory_block(message)
            if message is None:
                continue
        kept.append(message)
    return kept


def _without_memory_block(message: dict[str, Any]) -> dict[str, Any] | None:
    """The system message cut before the memory block; None when nothing else remains."""
    content = message.get("content")
    if isinstance(content, str):
        cut = _cut_block(content)
        return {**message, "content": cut} if cut else None
    if isinstance(content, list):
        parts: list[Any] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                cut = _cut_block(part["text"])
                if cut:
                    parts.append({**part, "text": cut})
            else:
                parts.append(part)
        return {**message, "content": parts} if parts else None
    return message


def _cut_block(text: str) -> str:
    starts = [i for i in (text.find(opener) for opener in MEMORY_BLOCK_OPENERS) if i >= 0]
    return text[: min(starts)].rstrip() if starts else text


def _strip_task_request(body: dict[str, Any]) -> None:
    """A task request that does reach the inlet: remove memories from it, add none."""
    messages = body.get("messages")
    if isinstance(messages, list):
        messages[:] = task_transcript(messages)


# --- outlet ----------------------------------------------------------------------------------


async def _hand_over_turn(
    body: dict[str, Any],
    *,
    valves: Filter.Valves,
    user: dict[str, Any] | None,
    metadata: dict[str, Any],
    emitter: EventEmitter | None,
    user_valves_model: type[Filter.UserValves],
    assistant: dict[str, str] | None = None,
) -> None:
    """Run the outlet: POST the finished turn to /v1/turns without touching the body."""
    chat_id = body.get("chat_id") or metadata.get("chat_id")
    kind = classify_chat(chat_id, _with_session_id(metadata, body.get("session_id")))
    sender = _sender_of(user)
    if kind in _KINDS_WITHOUT_MEMORY or kind == "temporary" or sender is None:
        return
    user_valves = _read_user_valves(user, user_valves_model)
    if not user_valves.enabled:
        return
    turn = _finished_turn(
        body.get("messages"), reply_id=body.get("id"), sent=_dict_of(metadata.get("user_message"))
    )
    if turn is None or _is_command_or_typo(str(turn.get("user_message", ""))):
        return
    inlet_line = _inlet_status_of(sender[0], chat_id)
    try:
        response = await asyncio.wait_for(
            _post_for_chat(
                valves,
                "/v1/turns",
                turn,
                timeout_s=valves.outlet_timeout_s,
                kind=kind,
                chat_id=chat_id,
                sender=sender,
                metadata=metadata,
                assistant=assistant,
            ),
            timeout=valves.outlet_timeout_s,
        )
    except Exception as exc:
        failure = _as_failure(exc, valves, timeout_s=valves.outlet_timeout_s)
        log.warning("memory service did not take the turn: %s", failure.detail)
        if user_valves.show_status:
            line = STATUS_NOT_SAVED
            if failure.lasting:  # the inlet's line (if any) already says why; once a day
                line = _failure_status(failure, user, sender[0], day=_day_of(metadata)) or ""
            shown = _joined(inlet_line, line)
            # a user told earlier today sees no line at all, not an empty one; and a line the
            # inlet showed already is not stored a second time for the same turn
            if shown and shown != inlet_line:
                await _emit_status(emitter, shown)
        return
    notice = _notice_of(response)
    if _is_admin(user):
        notice = _joined(notice, _admin_notice_of(response))
    if notice and user_valves.show_status:
        # Open WebUI shows a message's last status line: repeat the inlet's so both stay.
        await _emit_status(emitter, _joined(inlet_line, notice))


def _notice_of(response: httpx.Response) -> str | None:
    """The service's `notice` for the user (e.g. extraction is paused), if any."""
    try:
        return _notice_in(response.json())
    except Exception:
        return None


def _admin_notice_of(response: httpx.Response) -> str | None:
    """The service's `admin_notice` (e.g. no LLM is configured): shown to admins only."""
    try:
        notice = _dict_of(response.json()).get("admin_notice")
    except Exception:
        return None
    return notice if isinstance(notice, str) and notice.strip() else None


def _notice_in(answer: Any) -> str | None:
    """The `notice` of a decoded answer (e.g. a reminder is due), if any."""
    notice = answer.get("notice") if isinstance(answer, dict) else None
    return notice if isinstance(notice, str) and notice.strip() else None


def _finished_turn(
    messages: Any, *, reply_id: Any, sent: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Pick the new reply and its user message; None when there is no user text to hand over.

    `sent` is the user message as the client sent it (`__metadata__["user_message"]`): its
    `timestamp` is when the user wrote it, while the stored copy in `messages` carries the
    moment Open WebUI saved it (`Chats.insert_chat_turn` overwrites a new message's
    timestamp with the server's clock) — the same in live use, days apart when old chats are
    replayed or imported. So `occurred_at` is the sent one's time when it is the same message
    (or the stored one has no id: unsaved chats), else the stored one's.
    """
    if not isinstance(messages, list):
        return None
    items = [m if isinstance(m, dict) else {} for m in messages]
    reply_index = next(
        (i for i, m in enumerate(items) if reply_id is not None and m.get("id") == reply_id),
        None,
    )
    if reply_index is None:
        reply_index = next(
            (i for i in range(len(items) - 1, -1, -1) if items[i].get("role") == "assistant"),
            None,
        )
    search_end = reply_index if reply_index is not None else len(items)
    user_index = next(
        (i for i in range(search_end - 1, -1, -1) if items[i].get("role") == "user"),
        None,
    )
    if user_index is None:
        return None
    user_message = items[user_index]
    user_text = _text_of(user_message.get("content"))
    if not user_text.strip():
        return None

    message_id = user_message.get("id")
    if isinstance(message_id, str) and message_id:
        user_message_id = message_id
    elif isinstance(reply_id, str) and reply_id:
        user_message_id = "reply:" + reply_id
    else:
        return None

    turn: dict[str, Any] = {
        "user_message_id": user_message_id,
        "user_message": _shortened(user_text),
        "history": _history_before(items, user_index),
    }
    if reply_index is not None:
        reply_text = _assistant_text(items[reply_index].get("content"))
        if reply_text.strip():
            turn["assistant_message"] = _shortened(reply_text)
    sent = sent or {}
    same = sent.get("id") == message_id or not message_id
    stamps = (sent.get("timestamp"), user_message.get("timestamp"))
    occurred_at = _first_time(stamps if same else stamps[::-1])
    if occurred_at is not None:
        turn["occurred_at"] = occurred_at
    # The message before it in the branch: a later turn with the same parent is an edit of
    # this one, and the service then learns only from the new text.
    parent_id = items[user_index - 1].get("id") if user_index > 0 else ""
    if isinstance(parent_id, str):
        turn["parent_message_id"] = parent_id
    return turn


def _history_before(messages: list[dict[str, Any]], end: int) -> list[dict[str, str]]:
    """Up to six earlier user/assistant text messages, oldest first."""
    history: list[dict[str, str]] = []
    for message in reversed(messages[:end]):
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        content = message.get("content")
        text = _assistant_text(content) if role == "assistant" else _text_of(content)
        if not text.strip():
            continue
        history.append({"role": role, "content": _shortened(text)})
        if len(history) == _HISTORY_MESSAGES:
            break
    history.reverse()
    return history


def _with_session_id(metadata: dict[str, Any], session_id: Any) -> dict[str, Any]:
    """The outlet body carries session_id even when the reduced metadata does not."""
    if metadata.get("session_id") or not session_id:
        return metadata
    return {**metadata, "session_id": session_id}


# --- assistant memory ------------------------------------------------------------------------


def assistant_of(model_id: Any, model: Any, patterns: str) -> dict[str, str] | None:
    """{"id", "name"} of the turn's model when it keeps its own memory, else None.

    An admin marks it either in the `assistant_memory_models` valve (ids, `prefix*`) or with
    the tag OWN_MEMORY_TAG on the workspace model (Workspace → Models → Tags), which Open
    WebUI hands every hook as `__model__["info"]["meta"]["tags"]` (CONTRACT §1).
    """
    if not isinstance(model_id, str) or not model_id.strip() or len(model_id) > 200:
        return None
    details = _dict_of(model)
    same = details.get("id") == model_id
    tags = _dict_of(_dict_of(details.get("info")).get("meta")).get("tags") if same else None
    tagged = any(
        isinstance(tag, dict) and str(tag.get("name", "")).strip().lower() == OWN_MEMORY_TAG
        for tag in (tags if isinstance(tags, list) else [])
    )
    if not tagged and not _model_excluded(model_id, patterns):
        return None
    name = _short_text(details.get("name"), max_chars=255) if same else None
    return {"id": model_id, "name": name or model_id}


def _decide_assistant(
    body: dict[str, Any], model: Any, metadata: dict[str, Any], valves: Filter.Valves
) -> dict[str, str] | None:
    """The inlet's decision for this turn, left in `metadata` for its outlet."""
    assistant = assistant_of(
        body.get("model"), model or metadata.get("model"), valves.assistant_memory_models
    )
    metadata[ASSISTANT_METADATA_KEY] = dict(assistant) if assistant else {}
    return assistant


def _turn_assistant(
    body: dict[str, Any], model: Any, metadata: dict[str, Any], valves: Filter.Valves
) -> dict[str, str] | None:
    """The outlet's: what the inlet of the same turn decided; decided anew only when the
    inlet left nothing (an outlet called through `/api/chat/completed`).
    """
    decided = metadata.get(ASSISTANT_METADATA_KEY)
    if isinstance(decided, dict):
        if isinstance(decided.get("id"), str) and isinstance(decided.get("name"), str):
            return {"id": decided["id"], "name": decided["name"]}
        return None
    return assistant_of(body.get("model"), model, valves.assistant_memory_models)


# --- chat context ----------------------------------------------------------------------------


async def _chat_context(
    *,
    kind: str,
    chat_id: Any,
    sender: tuple[str, str | None, str | None],
    metadata: dict[str, Any],
    valves: Filter.Valves,
) -> dict[str, Any]:
    """The chat object of the HTTP contract: who speaks, where, and who else can see it."""
    user_id, user_name, user_timezone = sender
    metadata_folder_id = _folder_id_of(metadata.get("folder_id"))
    folder_id: str | None = None
    reason: str | None = None
    if kind == "channel":
        reason = "channel"
    elif kind == "temporary":
        folder_id = metadata_folder_id
    elif kind == "saved":
        folder_id, reason = await _saved_chat_facts(
            str(chat_id), sender_id=user_id, metadata_folder_id=metadata_folder_id
        )
    folder_id = await _folder_of_member(folder_id, user_id)
    chat: dict[str, Any] = {"user_id": user_id}
    if user_name:
        chat["user_name"] = user_name
    chat.update(
        {
            "chat_id": chat_id if isinstance(chat_id, str) else "",
            "kind": kind,
            "folder_id": folder_id,
            "collaborative": reason is not None,
            "collaborative_reason": reason,
            "read_in_temporary": valves.read_in_temporary_chats,
        }
    )
    timezone = _timezone_of(metadata) or user_timezone
    if timezone:
        chat["timezone"] = timezone
    return chat


async def _saved_chat_facts(
    chat_id: str, *, sender_id: str, metadata_folder_id: str | None
) -> tuple[str | None, str | None]:
    """Return (folder id, collaborative reason) of a saved chat (DESIGN §2, CONTRACT §7).

    Outside Open WebUI the metadata is trusted; inside it, a failed lookup counts as
    collaborative so that personal memories are never exposed by mistake.
    """
    if not _open_webui_present():
        return metadata_folder_id, None
    try:
        chats = importlib.import_module("open_webui.models.chats").Chats
        chat = await _resolved(chats.get_chat_by_id(chat_id))
        if chat is None:
            raise LookupError("chat not found")
    except Exception as exc:
        log.warning("chat lookup failed, treating the chat as shared: %r", exc)
        return metadata_folder_id, "lookup_failed"

    folder_id = _folder_id_of(_field(chat, "folder_id"))
    owner_id = _field(chat, "user_id")
    if owner_id != sender_id:
        return folder_id, "sender_not_owner"
    try:
        if await _chat_shared_to_continue(chat_id):
            return folder_id, "chat_shared"
        if folder_id is None:
            return None, None
        shared = await _folder_is_shared(folder_id, owner_id=owner_id)
    except Exception as exc:
        log.warning("share or folder lookup failed, treating the chat as shared: %r", exc)
        return folder_id, "lookup_failed"
    return folder_id, "folder_shared" if shared else None


async def _folder_of_member(folder_id: str | None, user_id: str) -> str | None:
    """`folder_id` when `user_id` is a member of that folder now, else None (DESIGN §3).

    Membership is what Open WebUI itself checks (`has_folder_access`, read): the owner, or a
    user or group grant on the folder or an ancestor. A collaborator in a chat that sits in
    someone's private folder, a user whose grant was revoked and a client that names any
    folder in its request are no members. Outside Open WebUI the folder is taken as given;
    inside it, a failed lookup sends no folder.
    """
    if folder_id is None or not _open_webui_present():
        return folder_id
    try:
        folders = importlib.import_module("open_webui.models.folders").Folders
        access = importlib.import_module("open_webui.utils.access_control.folders")
        folder = await _resolved(folders.get_folder_by_id(folder_id))
        if folder is None:
            return None
        # `db` has no default in 0.12.4 (COMMANDS.md §5): None opens a session of its own.
        member = await _resolved(access.has_folder_access(user_id, folder, "read", None))
    except Exception as exc:
        log.warning("folder membership lookup failed, sending no folder: %r", exc)
        return None
    return folder_id if member is True else None


async def _folder_is_shared(folder_id: str, *, owner_id: str) -> bool:
    """True if the folder or an ancestor belongs to or is granted to anyone but the owner."""
    folders = importlib.import_module("open_webui.models.folders").Folders
    access_grants = importlib.import_module("open_webui.models.access_grants").AccessGrants
    seen: set[str] = set()
    current: str | None = folder_id
    while current is not None:
        if current in seen or len(seen) >= _MAX_FOLDER_DEPTH:
            raise LookupError("folder ancestry does not end")
        seen.add(current)
        folder = await _resolved(folders.get_folder_by_id(current))
        if folder is None:
            raise LookupError("folder not found")
        folder_owner = _field(folder, "user_id")
        if folder_owner is not None and folder_owner != owner_id:
            return True
        grants = await _resolved(access_grants.get_grants_by_resource("folder", current))
        if any(_grants_someone_else(grant, owner_id) for grant in grants or []):
            return True
        current = _folder_id_of(_field(folder, "parent_id"))
    return False


def _grants_someone_else(grant: Any, owner_id: str) -> bool:
    return not (
        _field(grant, "principal_type") == "user" and _field(grant, "principal_id") == owner_id
    )


async def _chat_shared_to_continue(chat_id: str) -> bool:
    """True when others may post in the chat through a share link in continue mode.

    Open WebUI keeps the mode on the chat's share snapshot (`shared_chat.chat["share_mode"]`)
    and looks it up by chat id when it decides who may post; so does this.
    """
    shared_chats = importlib.import_module("open_webui.models.shared_chats").SharedChats
    shared = await _resolved(shared_chats.get_by_chat_id(chat_id))
    return shared is not None and _dict_of(_field(shared, "chat")).get("share_mode") == "continue"


def _open_webui_present() -> bool:
    """True when running inside Open WebUI (its package can be imported)."""
    try:
        importlib.import_module("open_webui")
    except ModuleNotFoundError as exc:
        return exc.name != "open_webui"
    except Exception:
        return True
    return True


# --- HTTP ------------------------------------------------------------------------------------


async def _post_for_chat(
    valves: Filter.Valves,
    path: str,
    payload: dict[str, Any],
    *,
    timeout_s: float,
    kind: str,
    chat_id: Any,
    sender: tuple[str, str | None, str | None],
    metadata: dict[str, Any],
    assistant: dict[str, str] | None = None,
) -> httpx.Response:
    """Work out the chat context (DESIGN §2) and POST it with `payload` to the service."""
    chat = await _chat_context(
        kind=kind, chat_id=chat_id, sender=sender, metadata=metadata, valves=valves
    )
    if assistant:
        chat["assistant_id"] = assistant["id"]
        chat["assistant_name"] = assistant["name"]
    return await _post(valves, path, {"chat": chat, **payload}, timeout_s=timeout_s)


async def _post(
    valves: Filter.Valves, path: str, payload: dict[str, Any], *, timeout_s: float
) -> httpx.Response:
    """POST JSON to the service; raise on a transport error or a non-2xx status."""
    headers = {"Accept": "application/json"}
    if valves.api_key:
        headers["Authorization"] = f"Bearer {valves.api_key}"
    base = valves.service_url.rstrip("/")
    try:
        # trust_env=False: the service is addressed directly, never through an HTTP proxy.
        async with httpx.AsyncClient(
            timeout=timeout_s, verify=_tls_context(), trust_env=False
        ) as client:
            response = await client.post(base + path, json=payload, headers=headers)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise ServiceFailure(
            f"the service_url valve ({base!r}) is not an http(s) address: {exc}", lasting=True
        ) from exc
    except httpx.TimeoutException as exc:
        raise ServiceFailure(
            f"the memory service at {base} did not answer within {timeout_s:g} s", lasting=False
        ) from exc
    except httpx.HTTPError as exc:
        raise ServiceFailure(
            f"cannot reach the memory service at {base} ({exc or type(exc).__name__}): is it "
            "running, and is the service_url valve its address as Open WebUI's server "
            "reaches it?",
            lasting=False,
        ) from exc
    if not 200 <= response.status_code < 300:
        raise _failure_of(response, base)
    return response


class ServiceFailure(Exception):
    """The memory service could not be used for this turn.

    Attributes:
        detail: the exact cause in one sentence, for admins (never a secret).
        lasting: True when retrying cannot help (wrong key, wrong address or service,
            incompatible versions): ordinary users are told to ask their admin.
    """

    def __init__(self, detail: str, *, lasting: bool) -> None:
        super().__init__(detail)
        self.detail = detail
        self.lasting = lasting


def _failure_of(response: httpx.Response, base: str) -> ServiceFailure:
    """What a non-2xx answer means; only our service sends SERVICE_HEADER."""
    code = response.status_code
    version = response.headers.get(SERVICE_HEADER)
    if code >= 500:  # a crash answers before any header is added (and a proxy may answer)
        return ServiceFailure(f"the memory service at {base} failed (HTTP {code})", lasting=False)
    if version is None:
        return ServiceFailure(
            f"{base} answered HTTP {code} but is not the memory service: check the "
            "service_url valve (its address and port)",
            lasting=True,
        )
    if code == 403:  # ScopeDenied: not this user's chat, as far as the service knows
        return ServiceFailure(
            f"the memory service at {base} refused this chat (HTTP 403): {_detail_of(response)}",
            lasting=False,
        )
    if code == 401:
        return ServiceFailure(
            f"the memory service at {base} refused the api_key valve (HTTP {code}): set it to "
            "the service's key (`python -m service api-key` prints it)",
            lasting=True,
        )
    if code in (404, 405):
        return _no_such_route(base, response, version)
    if code == 422 and not _compatible(version):
        return _incompatible(base, version, code)
    return ServiceFailure(f"the memory service at {base} answered HTTP {code}", lasting=False)


def _no_such_route(base: str, response: httpx.Response, version: str) -> ServiceFailure:
    """Our service knows no such path: a service_url with a path (`…/v1`) before a version
    mismatch, since every route of the service sits under `/v1` of its bare address.
    """
    code = response.status_code
    parts = urlsplit(base)
    extra = parts.path.rstrip("/")
    if extra:
        root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
        hint = "should not end in /v1" if extra.lower().endswith("/v1") else "should have no path"
        return ServiceFailure(
            f"the memory service at {base} has no {_path_asked(response)} (HTTP {code}): "
            f"the service_url valve {hint}; set it to {root} (the service's address and port)",
            lasting=True,
        )
    if not _compatible(version):
        return _incompatible(base, version, code)
    return ServiceFailure(
        f"the memory service {version} at {base} has no {_path_asked(response)} "
        f"(HTTP {code}): check the service_url valve",
        lasting=True,
    )


def _path_asked(response: httpx.Response) -> str:
    try:
        return response.request.url.path
    except RuntimeError:  # an answer built without its request
        return "this path"


def _incompatible(base: str, version: str, code: int) -> ServiceFailure:
    return ServiceFailure(
        f"the memory service {version} at {base} does not understand this filter "
        f"{FILTER_VERSION} (HTTP {code}): incompatible versions; install the filter that "
        "comes with the service (`python -m service openwebui install`)",
        lasting=True,
    )


def _detail_of(response: httpx.Response) -> str:
    """The sentence of an error answer (`detail`), or "" when there is none."""
    try:
        detail = response.json().get("detail")
    except Exception:
        return ""
    return detail[:300] if isinstance(detail, str) else ""


def _compatible(service_version: str) -> bool:
    """Same major and minor version as this filter (0.x releases may change the API)."""
    return service_version.split(".")[:2] == FILTER_VERSION.split(".")[:2]


def _read_answer(
    response: httpx.Response, valves: Filter.Valves, parse: Callable[[Any], Any]
) -> Any:
    """Decode a 2xx answer with `parse`; an answer of the wrong shape is a ServiceFailure.

    Not JSON from our service is a damaged answer (the network, a proxy): retrying may help.
    Valid JSON of another shape from our service means another version; anything from a
    server without SERVICE_HEADER means service_url names the wrong server.
    """
    base = valves.service_url.rstrip("/")
    version = response.headers.get(SERVICE_HEADER)
    try:
        decoded = response.json()
    except ValueError as exc:
        if version is None:
            raise _not_the_service(base, exc) from exc
        raise ServiceFailure(
            f"the memory service at {base} sent a damaged answer ({exc})", lasting=False
        ) from exc
    try:
        return parse(decoded)
    except ValueError as exc:
        if version is None:
            raise _not_the_service(base, exc) from exc
        raise ServiceFailure(
            f"the memory service {version} at {base} answered in a shape this filter "
            f"{FILTER_VERSION} does not know ({exc}): incompatible versions",
            lasting=True,
        ) from exc


def _not_the_service(base: str, exc: Exception) -> ServiceFailure:
    return ServiceFailure(
        f"{base} answered, but not as the memory service does ({exc}): check the service_url valve",
        lasting=True,
    )


def _command_text(answer: Any) -> str:
    text = answer.get("text") if isinstance(answer, dict) else None
    if not isinstance(text, str):
        raise ValueError("the command answer has no text")
    return text


def _as_failure(exc: BaseException, valves: Filter.Valves, *, timeout_s: float) -> ServiceFailure:
    if isinstance(exc, ServiceFailure):
        return exc
    base = valves.service_url.rstrip("/")
    if isinstance(exc, TimeoutError):
        return ServiceFailure(
            f"the memory service at {base} did not answer within {timeout_s:g} s", lasting=False
        )
    return ServiceFailure(f"calling the memory service at {base} failed: {exc!r}", lasting=False)


# --- who is told what ------------------------------------------------------------------------

#: user id → the day (UTC) an ordinary user was last told memory is misconfigured
_TOLD_MISCONFIGURED: dict[str, str] = {}
#: (user id, chat id) → the inlet's status line for the turn now running in that chat
_INLET_STATUS: dict[tuple[str, str], str] = {}
_MAX_REMEMBERED = 10_000


def _is_admin(user: Any) -> bool:
    return isinstance(user, dict) and user.get("role") == "admin"


def _failure_status(failure: ServiceFailure, user: Any, user_id: str, *, day: str) -> str | None:
    """The status line for a failure: admins get the cause; users a lasting one once a day.

    `day` ("YYYY-MM-DD", UTC) is when the user sent the message (`_day_of`).
    """
    if not failure.lasting:
        return STATUS_UNAVAILABLE
    if _is_admin(user):
        return STATUS_MISCONFIGURED_ADMIN + failure.detail
    if _TOLD_MISCONFIGURED.get(user_id) == day:
        return None
    if len(_TOLD_MISCONFIGURED) >= _MAX_REMEMBERED:
        _TOLD_MISCONFIGURED.clear()
    _TOLD_MISCONFIGURED[user_id] = day
    return STATUS_MISCONFIGURED


def _day_of(metadata: dict[str, Any]) -> str:
    """The UTC day the user sent this turn's message: its timestamp as Open WebUI passed it
    on (the browser's), else this server's clock. A user's "once a day" follows their own
    messages, and a test can send tomorrow's message without waiting a day.
    """
    sent = _iso_time(_dict_of(metadata.get("user_message")).get("timestamp"))
    return sent[:10] if sent else datetime.now(UTC).strftime("%Y-%m-%d")


def _remember_inlet_status(user_id: str, chat_id: Any, line: str | None) -> None:
    if not isinstance(chat_id, str) or not chat_id:
        return
    if len(_INLET_STATUS) >= _MAX_REMEMBERED:
        _INLET_STATUS.clear()
    _INLET_STATUS[(user_id, chat_id)] = line or ""


def _inlet_status_of(user_id: str, chat_id: Any) -> str:
    """The inlet's line for this chat's turn (consumed), "" when none was shown."""
    if not isinstance(chat_id, str):
        return ""
    return _INLET_STATUS.pop((user_id, chat_id), "")


def _joined(*lines: str | None) -> str:
    """The non-empty lines in order, each once (the outlet repeats the inlet's line, and a
    failure of both says the same thing twice).
    """
    return STATUS_SEPARATOR.join(dict.fromkeys(line for line in lines if line))


# --- typed commands --------------------------------------------------------------------------


def command_typo_hint(text: str) -> str | None:
    """The hint for a mistyped `/memory` (`/memroy list`, `/memorys`), else None.

    A first word one edit (or one swap of neighbours) away from `/memory` or `/memories`
    is taken for a typo; `/memo`, `/member` or `/models` are not.
    """
    words = text.strip().split(maxsplit=1)
    if not words or not words[0].startswith("/"):
        return None
    head = words[0].lower()
    if head in _COMMAND_WORDS or not any(_edits(head, w) == 1 for w in _COMMAND_WORDS):
        return None
    rest = " " + " ".join(words[1].split()[:1]) if len(words) > 1 else " help"
    return COMMAND_TYPO.format(rest=rest)


def _is_command_or_typo(text: str) -> bool:
    return is_memory_command(text) or command_typo_hint(text) is not None


def _edits(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbours that turn a into b."""
    if abs(len(a) - len(b)) > 2:
        return 3
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        previous2, previous = previous, current
    return previous[-1]


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    """Built once: loading the CA bundle for every client would block the event loop."""
    return httpx.create_ssl_context()


# --- small readers ---------------------------------------------------------------------------


async def _emit_status(emitter: EventEmitter | None, description: str) -> None:
    """Show a finished status line; a missing or failing emitter is ignored."""
    if not emitter:
        return
    try:
        result = emitter({"type": "status", "data": {"description": description, "done": True}})
        if inspect.isawaitable(result):
            await result
    except Exception as exc:
        log.debug("status event not delivered: %r", exc)


async def _resolved(value: Any) -> Any:
    """Open WebUI's table methods are async in 0.12 but were sync before; accept both."""
    if inspect.isawaitable(value):
        return await value
    return value


def _metadata_of(body: dict[str, Any], metadata: Any) -> dict[str, Any]:
    if isinstance(metadata, dict):
        return metadata
    return _dict_of(body.get("metadata"))


def _sender_of(user: Any) -> tuple[str, str | None, str | None] | None:
    """(user id, name, time zone) of the turn's sender, or None without a usable id."""
    if not isinstance(user, dict):
        return None
    user_id = user.get("id")
    if not isinstance(user_id, str) or not user_id.strip():
        return None
    name = user.get("name")
    return (
        user_id,
        name if isinstance(name, str) and name.strip() else None,
        _short_text(user.get("timezone")),
    )


def _timezone_of(metadata: dict[str, Any]) -> str | None:
    """The browser's IANA time zone sent with this request (`{{CURRENT_TIMEZONE}}`)."""
    return _short_text(_dict_of(metadata.get("variables")).get("{{CURRENT_TIMEZONE}}"))


def _user_message_id(metadata: dict[str, Any]) -> str | None:
    """Id of the user message of this turn, if Open WebUI sent one."""
    for value in (
        metadata.get("user_message_id"),
        _dict_of(metadata.get("user_message")).get("id"),
    ):
        text = _short_text(value, max_chars=255)
        if text:
            return text
    return None


def _short_text(value: Any, *, max_chars: int = 64) -> str | None:
    """A non-empty string of at most `max_chars` characters, else None."""
    if isinstance(value, str) and value.strip() and len(value.strip()) <= max_chars:
        return value.strip()
    return None


def _read_user_valves(user: Any, model: type[Filter.UserValves]) -> Filter.UserValves:
    """The sender's UserValves: an instance, a dict, or defaults when missing or invalid."""
    raw = user.get("valves") if isinstance(user, dict) else None
    if isinstance(raw, model):
        return raw
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    if isinstance(raw, dict):
        try:
            return model.model_validate({k: raw[k] for k in model.model_fields if k in raw})
        except ValidationError:
            log.debug("ignoring invalid user valves")
    return model()


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _text_of(content: Any) -> str:
    """Text parts of a message's content; images and files are left out."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    return ""


def _assistant_text(content: Any) -> str:
    return _DETAILS_BLOCK.sub("", _text_of(content)).strip()


def _shortened(text: str) -> str:
    """`text`, or "… " and its last characters when longer than MAX_SENT_CHARS: the end of a
    long message (after a pasted document or log) usually carries the request.
    """
    if len(text) <= MAX_SENT_CHARS:
        return text
    return _CUT_MARK + text[len(text) - MAX_SENT_CHARS + len(_CUT_MARK) :]


def _iso_time(value: Any) -> str | None:
    """Epoch seconds (or milliseconds) as an ISO 8601 UTC time; None when unusable."""
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


def _first_time(values: tuple[Any, ...]) -> str | None:
    """The first of `values` (epoch seconds or milliseconds) that is a believable message
    time — readable, not before 2000, not more than a day ahead of this server's clock — as
    its ISO time; None when none is.
    """
    latest = datetime.now(UTC).timestamp() + _MESSAGE_AHEAD_S
    for value in values:
        moment = _iso_time(value)
        if moment is None:
            continue
        at = datetime.strptime(moment, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        if _EARLIEST_MESSAGE <= at and at.timestamp() <= latest:
            return moment
    return None


def _folder_id_of(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _field(obj: Any, name: str) -> Any:
    """Read a field of an Open WebUI model or of a plain dict."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _dict_of(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
