"""The turn ledger: one row per (chat, user message), the idempotency key of extraction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage.tables import TurnRow


class TurnStatus(StrEnum):
    """Where a turn is in the write path."""

    QUEUED = "queued"  #: accepted, waiting for extraction
    DONE = "done"  #: extracted; the texts are erased from the payload
    FAILED = "failed"  #: extraction gave up; visible in /v1/status


@dataclass(frozen=True, slots=True)
class Turn:
    """A ledger row as it leaves storage."""

    id: int  #: ledger id (job argument)
    chat_id: str  #: chat of the turn
    user_message_id: str  #: user message of the turn
    user_id: str  #: sender
    status: TurnStatus  #: queued, done or failed
    payload: dict[str, Any]  #: chat context and texts (texts erased when done)


def _to_turn(row: TurnRow) -> Turn:
    return Turn(row.id, row.chat_id, row.user_message_id, row.user_id, TurnStatus(row.status),
                dict(row.payload))


async def accept(
    session: AsyncSession, *, chat_id: str, user_message_id: str, user_id: str,
    payload: dict[str, Any],
) -> int | None:
    """Record a turn; returns its id, or None when this (chat, message) was seen before."""
    stmt = (
        pg_insert(TurnRow)
        .values(chat_id=chat_id, user_message_id=user_message_id, user_id=user_id,
                status=TurnStatus.QUEUED.value, payload=payload)
        .on_conflict_do_nothing(index_elements=["chat_id", "user_message_id"])
        .returning(TurnRow.id)
    )
    return (await session.execute(stmt)).scalar()


async def lock_sender(session: AsyncSession, *, user_id: str) -> None:
    """Serialize one sender's extractions until the transaction ends (advisory lock).

    Two turns of the same user then never insert the same new fact side by side; the lock
    is released on commit, rollback or a lost connection.
    """
    await session.execute(
        select(func.pg_advisory_xact_lock(func.hashtextextended("memory-sender:" + user_id, 0)))
    )


async def get_for_update(session: AsyncSession, *, turn_id: int) -> Turn | None:
    """The turn, row-locked until the unit of work ends (one extraction at a time)."""
    row = (
        await session.execute(select(TurnRow).where(TurnRow.id == turn_id).with_for_update())
    ).scalar()
    return _to_turn(row) if row else None


async def finish(
    session: AsyncSession, *, turn_id: int, status: TurnStatus, memories_written: int = 0,
    error: str | None = None,
) -> None:
    """Close a turn. A done turn's message texts are erased (only the ledger key stays); a
    failed one keeps them, already redacted of secrets, until it is retried."""
    await session.execute(
        update(TurnRow).where(TurnRow.id == turn_id).values(
            status=status.value, memories_written=memories_written, error=error,
            finished_at=datetime.now(UTC),
            payload=(TurnRow.payload.op("-")("texts") if status is TurnStatus.DONE
                     else TurnRow.payload),
        )
    )


async def chat_ids_of(session: AsyncSession, *, user_id: str) -> list[str]:
    """Every chat the user handed a turn over from."""
    stmt = select(TurnRow.chat_id).where(TurnRow.user_id == user_id).distinct()
    return sorted(str(c) for c in (await session.execute(stmt)).scalars() if c)


async def waiting(session: AsyncSession) -> list[tuple[int, str]]:
    """(turn id, sender id) of turns still waiting for extraction, oldest first."""
    stmt = (select(TurnRow.id, TurnRow.user_id)
            .where(TurnRow.status == TurnStatus.QUEUED.value).order_by(TurnRow.id))
    return [(int(i), str(u)) for i, u in (await session.execute(stmt)).all()]


async def counts(session: AsyncSession) -> dict[str, int]:
    """Number of turns per status."""
    rows = await session.execute(select(TurnRow.status, func.count()).group_by(TurnRow.status))
    found = {status: int(n) for status, n in rows.all()}
    return {s.value: found.get(s.value, 0) for s in TurnStatus}
