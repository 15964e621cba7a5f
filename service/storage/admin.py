"""Operators' view of the turn ledger and the job queue: failed turns, retries, queue depth.

Nothing here returns message text: a listed turn carries its ids, status, error sentence
and whether its texts are still there to retry from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from service.core.records import RequeueResult, Status, TurnStatus
from service.storage.tables import MemoryRow, TurnRow

__all__ = [
    "DatabaseFacts",
    "RequeueResult",
    "TurnSummary",
    "database_facts",
    "job_counts",
    "list_turns",
    "requeue_failed",
]

ERROR_MAX_CHARS = 300
"""Longest error sentence returned in a listing (characters)."""


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """A ledger row without its message texts."""

    id: int  #: ledger id
    chat_id: str  #: chat of the turn
    user_message_id: str  #: user message of the turn
    user_id: str  #: sender
    status: TurnStatus  #: queued, done or failed
    error: str | None  #: why it failed (first line, at most ERROR_MAX_CHARS)
    memories_written: int  #: memories the extraction wrote
    created_at: datetime  #: when the outlet handed it over
    finished_at: datetime | None  #: when it was done or gave up
    has_texts: bool  #: its message texts are still stored (a retry can extract them)


def _first_line(error: str | None) -> str | None:
    if error is None:
        return None
    line = error.strip().splitlines()[0] if error.strip() else ""
    return line[:ERROR_MAX_CHARS]


async def list_turns(
    session: AsyncSession, *, status: TurnStatus, limit: int, offset: int
) -> tuple[list[TurnSummary], int]:
    """A page of turns with `status`, newest first, and how many there are.

    Args:
        limit: rows in the page (the caller bounds it).
        offset: rows skipped.
    """
    has_texts = TurnRow.payload.has_key("texts").label("has_texts")
    stmt = (
        select(
            TurnRow.id,
            TurnRow.chat_id,
            TurnRow.user_message_id,
            TurnRow.user_id,
            TurnRow.status,
            TurnRow.error,
            TurnRow.memories_written,
            TurnRow.created_at,
            TurnRow.finished_at,
            has_texts,
        )
        .where(TurnRow.status == status.value)
        .order_by(TurnRow.id.desc())
        .limit(limit)
        .offset(offset)
    )
    rows = (await session.execute(stmt)).all()
    total = (
        await session.execute(select(func.count()).where(TurnRow.status == status.value))
    ).scalar_one()
    items = [
        TurnSummary(
            int(r.id),
            r.chat_id,
            r.user_message_id,
            r.user_id,
            TurnStatus(r.status),
            _first_line(r.error),
            int(r.memories_written or 0),
            r.created_at,
            r.finished_at,
            bool(r.has_texts),
        )
        for r in rows
    ]
    return items, int(total)


async def requeue_failed(session: AsyncSession, *, turn_id: int) -> tuple[RequeueResult, str]:
    """Put a failed turn back to queued (error and finish time cleared), row-locked.

    The caller queues its extraction job after the commit; the job then finds the row
    queued and runs it once, as for a fresh turn.

    Returns:
        (what happened, the turn's sender id or "" when there is no such turn).
    """
    row = (
        await session.execute(
            select(TurnRow.status, TurnRow.user_id, TurnRow.payload.has_key("texts"))
            .where(TurnRow.id == turn_id)
            .with_for_update()
        )
    ).first()
    if row is None:
        return RequeueResult.NOT_FOUND, ""
    status, user_id, has_texts = row
    if status != TurnStatus.FAILED.value:
        return RequeueResult.NOT_FAILED, str(user_id)
    if not has_texts:
        return RequeueResult.NO_TEXTS, str(user_id)
    await session.execute(
        update(TurnRow)
        .where(TurnRow.id == turn_id)
        .values(status=TurnStatus.QUEUED.value, error=None, finished_at=None)
    )
    return RequeueResult.REQUEUED, str(user_id)


async def job_counts(session: AsyncSession) -> dict[tuple[str, str], int]:
    """(queue, status) → jobs waiting (`todo`), running (`doing`) or due later
    (`scheduled`: the quiet checks of recent turns) in the job queue.
    """
    rows = await session.execute(
        text(
            "SELECT queue_name, CASE WHEN status = 'todo' AND scheduled_at > now() "
            "THEN 'scheduled' ELSE status::text END AS state, count(*) FROM procrastinate_jobs "
            "WHERE status IN ('todo', 'doing') GROUP BY queue_name, state"
        )
    )
    return {(str(q), str(s)): int(n) for q, s, n in rows.all()}


@dataclass(frozen=True, slots=True)
class DatabaseFacts:
    """What the database server is (for `doctor`)."""

    server_version: str  #: PostgreSQL's `server_version`, e.g. "16.4"
    pgvector_version: str | None  #: the installed `vector` extension's version; None = missing
    pgvector_available: str | None  #: the version `CREATE EXTENSION vector` would install


async def database_facts(session: AsyncSession) -> DatabaseFacts:
    """The server's version and the pgvector extension's (installed and available)."""
    server = (await session.execute(text("SHOW server_version"))).scalar_one()
    installed = (
        await session.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
    ).scalar()
    available = (
        await session.execute(
            text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
        )
    ).scalar()
    return DatabaseFacts(str(server), installed and str(installed), available and str(available))


async def count_active_memories(session: AsyncSession) -> int:
    """Active memories of every owner: a service-wide figure for /v1/status, never shown per
    user (no scope applies).
    """
    count = await session.execute(
        select(func.count()).where(MemoryRow.status == Status.ACTIVE.value)
    )
    return int(count.scalar_one())
