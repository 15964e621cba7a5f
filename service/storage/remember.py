"""SQL of "Remember this" clicks: one row per click while its LLM call runs.

The row is what a forget all, a chat deletion or a user deletion landing during the call
marks (`discard`); the click's write transaction locks it (`lock`) and writes nothing when
it was marked. Rows are deleted when the click ends (`finish`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage.tables import RememberRequestRow

__all__ = ["GONE", "discard", "finish", "lock", "prune", "running", "start"]

GONE = "gone"
"""`lock`: the row no longer exists (the click ran out and was cleaned up)."""


async def start(
    session: AsyncSession, *, user_id: str, chat_id: str, message_id: str, at: datetime
) -> int:
    """Record a click before its LLM call; returns the row id."""
    stmt = (
        RememberRequestRow.__table__.insert()
        .values(user_id=user_id, chat_id=chat_id, message_id=message_id, started_at=at)
        .returning(RememberRequestRow.id)
    )
    return int((await session.execute(stmt)).scalar_one())


async def lock(session: AsyncSession, *, request_id: int) -> str | None:
    """Row-lock the click until the transaction ends; None while it is still wanted, else
    why not ("forget_all", "chat_deleted", "user_deleted", or GONE).
    """
    stmt = (
        select(RememberRequestRow.discarded)
        .where(RememberRequestRow.id == request_id)
        .with_for_update()
    )
    row = (await session.execute(stmt)).first()
    if row is None:
        return GONE
    reason: str | None = row.discarded
    return reason


async def finish(session: AsyncSession, *, request_id: int) -> None:
    """The click ended (written, refused or discarded): its row goes."""
    await session.execute(delete(RememberRequestRow).where(RememberRequestRow.id == request_id))


async def discard(
    session: AsyncSession,
    *,
    reason: str,
    user_id: str | None = None,
    chat_ids: Sequence[str] = (),
) -> int:
    """Mark the running clicks of one user or of some chats: they will write nothing.

    Waits only for a click writing at this moment (a short transaction, never an LLM call).

    Returns:
        Rows marked.
    """
    where: list[ColumnElement[bool]] = [RememberRequestRow.discarded.is_(None)]
    if user_id is not None:
        where.append(RememberRequestRow.user_id == user_id)
    if chat_ids:
        where.append(RememberRequestRow.chat_id.in_(list(chat_ids)))
    if user_id is None and not chat_ids:
        return 0
    result = await session.execute(
        update(RememberRequestRow).where(*where).values(discarded=reason)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def prune(session: AsyncSession, *, older_than: datetime) -> int:
    """Delete rows of clicks that never ended (the service stopped during the call)."""
    result = await session.execute(
        delete(RememberRequestRow).where(RememberRequestRow.started_at < older_than)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def running(session: AsyncSession) -> int:
    """Clicks running now (for tests and status)."""
    stmt = select(func.count()).select_from(RememberRequestRow)
    return int((await session.execute(stmt)).scalar_one())
