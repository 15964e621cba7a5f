"""Outlet: accept a finished turn as a durable extraction job (DESIGN §5.1)."""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import datetime
from typing import Any

from procrastinate import exceptions as job_errors

from service.core import commands, privacy, safety
from service.core.records import ChatContext, ChatKind
from service.flows.runtime import Runtime
from service.storage import turns, user_state

log = logging.getLogger(__name__)

EXTRACT_TASK = "extract_turn"
EXTRACTION_QUEUE = "extraction"


def chat_to_json(chat: ChatContext) -> dict[str, Any]:
    data = asdict(chat)
    data["kind"] = chat.kind.value
    return data


def chat_from_json(data: dict[str, Any]) -> ChatContext:
    return ChatContext(**{**data, "kind": ChatKind(data["kind"])})


async def accept_turn(
    rt: Runtime, *, chat: ChatContext, user_message_id: str, user_message: str,
    assistant_message: str | None, history: list[tuple[str, str]], occurred_at: datetime | None,
) -> tuple[str, str]:
    """Store the turn and queue its extraction; answers before any extraction work.

    Returns:
        (status, detail): "queued", "duplicate" (this chat and message were seen before) or
        "skipped" (this chat may not write memories).
    """
    if not privacy.write_scope(chat):
        return "skipped", f"{chat.kind.value} chats do not write memories"
    if not user_message.strip():
        return "skipped", "the user message has no text"
    if commands.is_command(user_message):
        return "skipped", "memory commands are not remembered"
    payload = {
        "chat": chat_to_json(chat),
        "occurred_at": occurred_at.isoformat() if occurred_at else None,
        # Redacted before they are stored: a parked turn must hold no credentials.
        "texts": {"user": safety.redact_secrets(user_message),
                  "assistant": safety.redact_secrets(assistant_message or "") or None,
                  "history": [[role, safety.redact_secrets(text)] for role, text in history]},
    }
    async with rt.db.unit_of_work() as session:
        if await user_state.is_paused(session, user_id=chat.user_id):
            return "skipped", "learning is paused for this user (/memory resume)"
        turn_id = await turns.accept(session, chat_id=chat.chat_id, user_message_id=user_message_id,
                                     user_id=chat.user_id, payload=payload)
    if turn_id is None:
        return "duplicate", "this turn was already handed over"
    await defer_extraction(rt, turn_id=turn_id, user_id=chat.user_id)
    if not rt.llm.configured:
        return "queued", "turn saved; extraction waits until an LLM is configured"
    return "queued", "turn saved for extraction"


async def defer_extraction(rt: Runtime, *, turn_id: int, user_id: str) -> None:
    """Queue the extraction job of a turn (at most one waiting job per turn).

    One user's extractions are serialized inside the database (an advisory lock taken by the
    job's transaction), not by a job-queue lock: a job left running by a dead worker would
    hold a queue lock until it is recovered, while a transaction lock dies with its
    connection.
    """
    try:
        await rt.jobs.configure_task(
            EXTRACT_TASK, queue=EXTRACTION_QUEUE, queueing_lock=f"turn:{turn_id}",
        ).defer_async(turn_id=turn_id)
    except job_errors.AlreadyEnqueued:
        log.debug("turn %s of %s already has a waiting job", turn_id, user_id)


async def requeue_waiting_turns(rt: Runtime) -> int:
    """Queue a job for every turn still waiting (after a crash between save and queue).

    Returns the number of turns looked at; turns with a waiting job are left alone, and a
    turn that is already done is never extracted again (the job checks the ledger).
    """
    async with rt.db.unit_of_work() as session:
        waiting = await turns.waiting(session)
    for turn_id, user_id in waiting:
        await defer_extraction(rt, turn_id=turn_id, user_id=user_id)
    return len(waiting)
