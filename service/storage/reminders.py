"""Reminders in PostgreSQL: set once per message, fired once, cancelled to a tombstone.

Every statement names the owner (`user_id`): a reminder is only ever read, fired or changed
for the user who asked for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.core.reminders import Reminder, TriggerKind
from service.storage import notifications
from service.storage.notifications import REMINDERS_CHANGE
from service.storage.tables import ReminderRow

_PENDING = (ReminderRow.fired_at.is_(None), ReminderRow.cancelled_at.is_(None))


def to_record(row: ReminderRow) -> Reminder:
    """The frozen record of a row."""
    return Reminder(
        seq=row.id,
        user_id=row.user_id,
        content=row.content,
        trigger=TriggerKind(row.trigger_kind),
        due_at=row.due_at,
        all_day=row.all_day,
        timezone=row.timezone,
        cue=row.cue,
        created_at=row.created_at,
        fired_at=row.fired_at,
        cancelled_at=row.cancelled_at,
        source_chat_id=row.source_chat_id,
    )


async def insert(
    session: AsyncSession,
    *,
    user_id: str,
    content: str,
    trigger: TriggerKind,
    due_at: datetime | None,
    all_day: bool,
    timezone: str,
    cue: str | None,
    cue_vector: np.ndarray | None,
    embedding_model: str | None,
    source_chat_id: str | None,
    source_key: str,
    created_at: datetime,
) -> Reminder:
    """Store a reminder, once per (user, source_key).

    Args:
        due_at: time trigger: when it is due (tz-aware).
        cue_vector: context trigger: (dim,) float32 embedding of `cue`.
        source_key: "<chat id>:<user message id>"; a second insert with the same key (a
            regenerated reply) stores nothing.

    Returns:
        The reminder stored now, or the one stored earlier with the same key (which may be
        fired or cancelled since).
    """
    stmt = (
        pg_insert(ReminderRow)
        .values(
            user_id=user_id,
            content=content,
            trigger_kind=trigger.value,
            due_at=due_at,
            all_day=all_day,
            timezone=timezone,
            cue=cue,
            cue_embedding=cue_vector,
            embedding_model=embedding_model,
            source_chat_id=source_chat_id,
            source_key=source_key,
            created_at=created_at,
        )
        .on_conflict_do_nothing(index_elements=["user_id", "source_key"])
        .returning(ReminderRow)
    )
    row = (await session.execute(stmt)).scalar()
    if row is not None:  # other service processes drop their "none pending" entry at commit
        await notifications.notify(session, kind=REMINDERS_CHANGE, user_ids=[user_id])
    if row is None:
        row = (
            await session.execute(
                select(ReminderRow).where(
                    ReminderRow.user_id == user_id, ReminderRow.source_key == source_key
                )
            )
        ).scalar_one()
    return to_record(row)


async def fire(
    session: AsyncSession,
    *,
    user_id: str,
    now: datetime,
    query_vector: np.ndarray | None,
    model: str,
    min_similarity: float,
    chat_id: str | None,
    except_key: str | None,
) -> list[Reminder]:
    """Mark the user's due reminders as fired, and return them.

    Due: a time reminder whose `due_at` ≤ `now`, or a topic reminder whose cue is close to
    the message — similarity 1 - cosine_distance / 2 ≥ `min_similarity` (the project's
    relevance scale), compared only with cues embedded by the same model.

    One `UPDATE … WHERE fired_at IS NULL … RETURNING`: of two concurrent inlets, the second
    waits for the first's row locks, then finds those reminders fired and skips them.

    Args:
        query_vector: (dim,) float32 embedding of the message, L2-normalized; None: only
            time reminders are looked at.
        model: the embedding model's name.
        except_key: the source key of this turn's own message, never fired by it.
    """
    due = (ReminderRow.trigger_kind == TriggerKind.TIME.value) & (ReminderRow.due_at <= now)
    if query_vector is not None:
        max_distance = 2.0 * (1.0 - min_similarity)
        due = due | (
            (ReminderRow.trigger_kind == TriggerKind.CONTEXT.value)
            & (ReminderRow.embedding_model == model)
            & (ReminderRow.cue_embedding.cosine_distance(query_vector) <= max_distance)
        )
    stmt = (
        update(ReminderRow)
        .where(
            ReminderRow.user_id == user_id,
            *_PENDING,
            due,
            ReminderRow.source_key != (except_key or ""),
        )
        .values(fired_at=now, fired_chat_id=chat_id)
        .returning(ReminderRow)
    )
    return [to_record(r) for r in (await session.execute(stmt)).scalars()]


async def has_pending(session: AsyncSession, *, user_id: str) -> bool:
    """True when the user has a reminder that has neither fired nor been cancelled."""
    stmt = select(ReminderRow.id).where(ReminderRow.user_id == user_id, *_PENDING).limit(1)
    return (await session.execute(stmt)).scalar() is not None


async def stale_cues(session: AsyncSession, *, user_id: str, model: str) -> list[Reminder]:
    """The user's pending context reminders whose cue has no vector of `model`."""
    stmt = select(ReminderRow).where(
        ReminderRow.user_id == user_id,
        *_PENDING,
        ReminderRow.trigger_kind == TriggerKind.CONTEXT.value,
        func.coalesce(ReminderRow.embedding_model, "") != model,
    )
    return [to_record(r) for r in (await session.execute(stmt)).scalars()]


async def store_cue_vector(
    session: AsyncSession, *, user_id: str, seq: int, vector: np.ndarray, model: str
) -> None:
    """Give a pending context reminder its cue's vector of `model`."""
    await session.execute(
        update(ReminderRow)
        .where(
            ReminderRow.user_id == user_id,
            ReminderRow.id == seq,
            *_PENDING,
        )
        .values(cue_embedding=vector, embedding_model=model)
    )


async def list_for_user(
    session: AsyncSession,
    *,
    user_id: str,
    fired_since: datetime | None,
) -> list[Reminder]:
    """The user's pending reminders and those fired since `fired_since` (None: all fired).

    Cancelled ones are left out.
    """
    stmt = select(ReminderRow).where(
        ReminderRow.user_id == user_id, ReminderRow.cancelled_at.is_(None)
    )
    if fired_since is not None:
        stmt = stmt.where((ReminderRow.fired_at.is_(None)) | (ReminderRow.fired_at >= fired_since))
    return [to_record(r) for r in (await session.execute(stmt.order_by(ReminderRow.id))).scalars()]


async def get(session: AsyncSession, *, user_id: str, seq: int) -> Reminder | None:
    """One of the user's reminders that is not cancelled, or None."""
    row = (
        await session.execute(
            select(ReminderRow).where(
                ReminderRow.user_id == user_id,
                ReminderRow.id == seq,
                ReminderRow.cancelled_at.is_(None),
            )
        )
    ).scalar()
    return to_record(row) if row is not None else None


async def cancel(
    session: AsyncSession, *, user_id: str, seqs: Sequence[int], at: datetime
) -> list[int]:
    """Cancel reminders of the user: their text, cue and vector are removed, a tombstone
    stays (so the message that asked for one cannot set it again).

    Returns:
        Row ids cancelled now (already cancelled ones and other users' are not).
    """
    if not seqs:
        return []
    stmt = (
        update(ReminderRow)
        .where(
            ReminderRow.user_id == user_id,
            ReminderRow.id.in_(list(seqs)),
            ReminderRow.cancelled_at.is_(None),
        )
        .values(cancelled_at=at, content="", cue=None, cue_embedding=None, embedding_model=None)
        .returning(ReminderRow.id)
    )
    return list((await session.execute(stmt)).scalars())
