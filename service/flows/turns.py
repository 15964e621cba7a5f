"""Outlet: accept a finished turn into the ledger and schedule its batch (DESIGN §5.1).

Every accepted turn gets a quiet check, a job scheduled `MEMORY_BATCH_QUIET_S` later that
extracts the sender's waiting turns in the chat if nothing newer arrived by then; a turn
that makes a batch due (`service/core/batching.py`) also gets a job that runs at once. Both
are jobs in PostgreSQL (procrastinate, behind jobs/queue.py), so a restart loses neither.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.core import batching, commands, message_time, privacy, safety
from service.core.records import ChatContext, ChatKind
from service.errors import QueueUnavailable
from service.flows.runtime import JobQueueError, Runtime
from service.storage import turns, user_state
from service.storage.turns import Turn

log = logging.getLogger(__name__)

PAUSED_DETAIL = "learning is paused for this user (/memory resume)"

EXTRACT_TASK = "extract_turn"
"""Job: extract the waiting turns of a turn's chat and sender that are due (or all up to it)."""
QUIET_TASK = "extract_quiet_chat"
"""Job: the quiet check of a turn, scheduled MEMORY_BATCH_QUIET_S after it was accepted."""
EXTRACTION_QUEUE = "extraction"


def chat_to_json(chat: ChatContext) -> dict[str, Any]:
    """The chat context as a JSON object for the job queue."""
    data = asdict(chat)
    data["kind"] = chat.kind.value
    return data


def chat_from_json(data: dict[str, Any]) -> ChatContext:
    """The chat context back from `chat_to_json`'s object."""
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
    parent_message_id: str | None = None,
) -> tuple[str, str]:
    """Store the turn and queue its extraction; answers before any extraction work.

    The turn is stored with the time its memories are dated by: `occurred_at` (when the user
    wrote the message) when believable, else now, when the service received it
    (`core.message_time.stated_at`) — never the later moment extraction gets to it.

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
    # Each message with the user's message before it: "my password is" then "hunter2-Blue"
    # is one secret split over two messages.
    history_texts = safety.redact_conversation(history)
    earlier = next((text for role, text in reversed(history) if role == "user"), None)
    user_text = safety.redact_secrets(user_message, previous=earlier)
    assistant_text = safety.redact_secrets(assistant_message or "") or None
    texts = {
        "user": user_text,
        "assistant": assistant_text,
        "history": [[role, text] for role, text in history_texts],
    }
    payload = {
        "chat": chat_to_json(chat),
        "occurred_at": message_time.stated_at(occurred_at, arrived=datetime.now(UTC)).isoformat(),
        "texts": texts,
        "parent": parent_message_id,
    }
    digest = batching.message_hash(
        chat_id=chat.chat_id,
        user_id=chat.user_id,
        user_message=user_text,
        history=history_texts,
    )
    # The turn and its jobs are written in one transaction: a turn is never saved without
    # them, and a failure leaves nothing behind, so the filter's next hand-over is new.
    async with rt.db.unit_of_work() as session:
        if await user_state.is_paused(session, user_id=chat.user_id):
            return "skipped", PAUSED_DETAIL
        turn_id = await turns.accept(
            session,
            chat_id=chat.chat_id,
            user_message_id=user_message_id,
            user_id=chat.user_id,
            payload=payload,
            message_hash=digest,
            estimated_tokens=batching.turn_tokens(user_text, assistant_text),
        )
        due = False
        if turn_id is not None:
            waiting = await turns.pending(session, chat_id=chat.chat_id, user_id=chat.user_id)
            if parent_message_id is not None:
                waiting = await _drop_replaced(session, turn_id=turn_id, waiting=waiting)
            due = bool(
                batching.plan_batches(
                    [pending_view(t) for t in waiting], batch_policy(rt.settings), quiet=False
                )
            )
            await _queue_jobs(rt, session, turn_id=turn_id, user_id=chat.user_id, due=due)
    if turn_id is None:
        return "duplicate", "this turn was already handed over"
    if not rt.llm.configured:
        return "queued", "turn saved; extraction waits until an LLM is configured"
    if due:
        return "queued", "turn saved for extraction"
    return "queued", "turn saved; extracted with this chat's next batch"


REPLACED = "replaced: the user edited an earlier message of this branch"
"""Why a waiting turn was discarded by an edit (shown in the admin listing of turns)."""


async def _drop_replaced(session: AsyncSession, *, turn_id: int, waiting: list[Turn]) -> list[Turn]:
    """Discard the waiting turns an edit took off the chat's branch (`replaced_turns`);
    returns the turns still waiting.
    """

    def place(turn: Turn) -> batching.BranchTurn:
        texts = turn.payload.get("texts") or {}
        parent = turn.payload.get("parent")
        return batching.BranchTurn(
            turn_id=turn.id,
            user_message=str(texts.get("user") or ""),
            history=[(str(r), str(t)) for r, t in texts.get("history") or []],
            parent=parent if isinstance(parent, str) else None,
        )

    new = next((t for t in waiting if t.id == turn_id), None)
    if new is None:
        return waiting
    gone = batching.replaced_turns(place(new), [place(t) for t in waiting])
    if not gone:
        return waiting
    discarded = await turns.discard_waiting(session, turn_ids=gone, reason=REPLACED)
    log.info("turn %s replaced %s waiting turns of an edited branch", turn_id, discarded)
    return [t for t in waiting if t.id not in gone]


async def _queue_jobs(
    rt: Runtime, session: AsyncSession, *, turn_id: int, user_id: str, due: bool
) -> None:
    """Queue a new turn's jobs in the session's transaction (the queue's `connection`).

    Raises:
        QueueUnavailable: the queue refused them; the caller's transaction rolls back.
    """
    connection = (await (await session.connection()).get_raw_connection()).driver_connection
    try:
        async with session.begin_nested():  # a refused insert must not abort the turn's
            await defer_quiet_check(rt, turn_id=turn_id, user_id=user_id, connection=connection)
            if due:
                await defer_extraction(
                    rt, turn_id=turn_id, user_id=user_id, due_only=True, connection=connection
                )
    except JobQueueError as exc:
        log.error("turn of %s not saved: the job queue failed: %s", user_id, exc)
        raise QueueUnavailable(
            "the job queue did not take the turn; nothing was saved, hand it over again"
        ) from exc


async def defer_extraction(
    rt: Runtime,
    *,
    turn_id: int,
    user_id: str,
    due_only: bool = False,
    connection: Any | None = None,
) -> None:
    """Queue an extraction job for a turn's chat and sender (at most one waiting per turn).

    Args:
        due_only: extract only the batches that are due (thresholds, "remember that");
            False: every waiting turn of that chat and sender up to this one, now (a retry).
        connection: a psycopg connection whose transaction the job joins (None: its own).

    One user's extractions are serialized inside the database (an advisory lock taken by the
    job's transaction), not by a job-queue lock: a job left running by a dead worker would
    hold a queue lock until it is recovered, while a transaction lock dies with its
    connection.
    """
    lock = f"due:{turn_id}" if due_only else f"turn:{turn_id}"
    if not await rt.jobs.defer(
        EXTRACT_TASK,
        queue=EXTRACTION_QUEUE,
        queueing_lock=lock,
        connection=connection,
        turn_id=turn_id,
        due_only=due_only,
    ):
        log.debug("turn %s of %s already has a waiting job", turn_id, user_id)


async def defer_quiet_check(
    rt: Runtime, *, turn_id: int, user_id: str, connection: Any | None = None
) -> None:
    """Schedule the turn's quiet check `MEMORY_BATCH_QUIET_S` from now (once per turn);
    `connection` as for `defer_extraction`.
    """
    if not await rt.jobs.defer(
        QUIET_TASK,
        queue=EXTRACTION_QUEUE,
        queueing_lock=f"quiet:{turn_id}",
        schedule_in_s=rt.settings.batch_quiet_s,
        connection=connection,
        turn_id=turn_id,
    ):
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
