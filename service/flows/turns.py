"""Outlet: accept a finished turn into the ledger and schedule its batch (DESIGN §5.1).

Every accepted turn gets a quiet check, a job scheduled `MEMORY_BATCH_QUIET_S` later that
extracts the sender's waiting turns in the chat if nothing newer arrived by then; a turn
that makes a batch due (`service/core/batching.py`) also gets a job that runs at once. Both
are procrastinate jobs in PostgreSQL, so a restart loses neither.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from datetime import datetime
from typing import Any

from procrastinate import exceptions as job_errors

from service.config import Settings
from service.core import batching, commands, privacy, safety
from service.core.records import ChatContext, ChatKind
from service.flows.runtime import Runtime
from service.storage import turns, user_state
from service.storage.turns import Turn

log = logging.getLogger(__name__)

EXTRACT_TASK = "extract_turn"
"""Job: extract the waiting turns of a turn's chat and sender that are due (or all up to it)."""
QUIET_TASK = "extract_quiet_chat"
"""Job: the quiet check of a turn, scheduled MEMORY_BATCH_QUIET_S after it was accepted."""
EXTRACTION_QUEUE = "extraction"


def chat_to_json(chat: ChatContext) -> dict[str, Any]:
    data = asdict(chat)
    data["kind"] = chat.kind.value
    return data


def chat_from_json(data: dict[str, Any]) -> ChatContext:
    return ChatContext(**{**data, "kind": ChatKind(data["kind"])})


def batch_policy(settings: Settings) -> batching.BatchPolicy:
    """The batching thresholds of these settings."""
    return batching.BatchPolicy(
        max_tokens=settings.batch_tokens,
        max_messages=settings.batch_messages,
        lookback_turns=settings.batch_lookback_turns,
    )


def pending_view(turn: Turn) -> batching.PendingTurn:
    """What the batching decision needs of a waiting turn."""
    texts = turn.payload.get("texts") or {}
    user = str(texts.get("user") or "")
    tokens = turn.estimated_tokens or batching.turn_tokens(user, texts.get("assistant"))
    return batching.PendingTurn(
        turn_id=turn.id,
        tokens=tokens,
        remember=batching.asks_to_remember(user),
        context=json.dumps(turn.payload.get("chat"), sort_keys=True),
    )


async def accept_turn(
    rt: Runtime,
    *,
    chat: ChatContext,
    user_message_id: str,
    user_message: str,
    assistant_message: str | None,
    history: list[tuple[str, str]],
    occurred_at: datetime | None,
) -> tuple[str, str]:
    """Store the turn and queue its extraction; answers before any extraction work.

    Returns:
        (status, detail): "queued", "duplicate" (this chat and message — by id or by message
        hash — were seen before) or "skipped" (this chat may not write memories).
    """
    if not privacy.write_scope(chat):
        return "skipped", f"{chat.kind.value} chats do not write memories"
    if not user_message.strip():
        return "skipped", "the user message has no text"
    if commands.is_command(user_message):
        return "skipped", "memory commands are not remembered"
    # Redacted before they are stored: a parked turn must hold no credentials.
    texts = {
        "user": safety.redact_secrets(user_message),
        "assistant": safety.redact_secrets(assistant_message or "") or None,
        "history": [[role, safety.redact_secrets(text)] for role, text in history],
    }
    payload = {
        "chat": chat_to_json(chat),
        "occurred_at": occurred_at.isoformat() if occurred_at else None,
        "texts": texts,
    }
    digest = batching.message_hash(
        chat_id=chat.chat_id,
        user_id=chat.user_id,
        user_message=texts["user"],
        history=[(r, t) for r, t in texts["history"]],
    )
    async with rt.db.unit_of_work() as session:
        if await user_state.is_paused(session, user_id=chat.user_id):
            return "skipped", "learning is paused for this user (/memory resume)"
        turn_id = await turns.accept(
            session,
            chat_id=chat.chat_id,
            user_message_id=user_message_id,
            user_id=chat.user_id,
            payload=payload,
            message_hash=digest,
            estimated_tokens=batching.turn_tokens(texts["user"], texts["assistant"]),
        )
        due = False
        if turn_id is not None:
            waiting = await turns.pending(session, chat_id=chat.chat_id, user_id=chat.user_id)
            due = bool(
                batching.plan_batches(
                    [pending_view(t) for t in waiting], batch_policy(rt.settings), quiet=False
                )
            )
    if turn_id is None:
        return "duplicate", "this turn was already handed over"
    await defer_quiet_check(rt, turn_id=turn_id, user_id=chat.user_id)
    if due:
        await defer_extraction(rt, turn_id=turn_id, user_id=chat.user_id, due_only=True)
    if not rt.llm.configured:
        return "queued", "turn saved; extraction waits until an LLM is configured"
    if due:
        return "queued", "turn saved for extraction"
    return "queued", "turn saved; extracted with this chat's next batch"


async def defer_extraction(
    rt: Runtime, *, turn_id: int, user_id: str, due_only: bool = False
) -> None:
    """Queue an extraction job for a turn's chat and sender (at most one waiting per turn).

    Args:
        due_only: extract only the batches that are due (thresholds, "remember that");
            False: every waiting turn of that chat and sender up to this one, now (a retry).

    One user's extractions are serialized inside the database (an advisory lock taken by the
    job's transaction), not by a job-queue lock: a job left running by a dead worker would
    hold a queue lock until it is recovered, while a transaction lock dies with its
    connection.
    """
    lock = f"due:{turn_id}" if due_only else f"turn:{turn_id}"
    try:
        await rt.jobs.configure_task(
            EXTRACT_TASK,
            queue=EXTRACTION_QUEUE,
            queueing_lock=lock,
        ).defer_async(turn_id=turn_id, due_only=due_only)
    except job_errors.AlreadyEnqueued:
        log.debug("turn %s of %s already has a waiting job", turn_id, user_id)


async def defer_quiet_check(rt: Runtime, *, turn_id: int, user_id: str) -> None:
    """Schedule the turn's quiet check `MEMORY_BATCH_QUIET_S` from now (once per turn)."""
    try:
        await rt.jobs.configure_task(
            QUIET_TASK,
            queue=EXTRACTION_QUEUE,
            queueing_lock=f"quiet:{turn_id}",
            schedule_in={"seconds": rt.settings.batch_quiet_s},
        ).defer_async(turn_id=turn_id)
    except job_errors.AlreadyEnqueued:
        log.debug("turn %s of %s already has its quiet check", turn_id, user_id)


async def requeue_waiting_turns(rt: Runtime) -> int:
    """After a start: make sure every chat with waiting turns has its jobs.

    For each (chat, sender) with waiting turns, the newest gets a quiet check and a job for
    what is already due — both skipped when they survived in the queue. This covers a crash
    between saving a turn and queueing its jobs; a turn already done is never extracted
    again (the job checks the ledger).

    Returns:
        The number of (chat, sender) pairs with waiting turns.
    """
    async with rt.db.unit_of_work() as session:
        # no job runs yet: claims left by a killed worker would only delay its turns
        await turns.release_claims(session)
        waiting = await turns.waiting(session)
    for turn_id, user_id in waiting:
        await defer_quiet_check(rt, turn_id=turn_id, user_id=user_id)
        await defer_extraction(rt, turn_id=turn_id, user_id=user_id, due_only=True)
    return len(waiting)
