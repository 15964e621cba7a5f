"""SQL of imports: one writer per owner at a time, and the pending `/memory import` previews."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage.tables import PendingImportRow

__all__ = [
    "discard_pending",
    "discard_pending_from_chats",
    "lock_owner",
    "save_pending",
    "take_pending",
]


async def lock_owner(session: AsyncSession, *, owner_id: str) -> None:
    """Serialize imports into one owner until the transaction ends, so two imports of the
    same file running at once cannot both find nothing stored and both write.
    """
    await session.execute(
        select(func.pg_advisory_xact_lock(func.hashtextextended(f"import:{owner_id}", 0)))
    )


async def save_pending(
    session: AsyncSession, *, user_id: str, code: str, items: list[dict[str, Any]], at: datetime
) -> None:
    """Keep the import shown to `user_id` (replacing an earlier one) until it is confirmed."""
    stmt = pg_insert(PendingImportRow).values(
        user_id=user_id, code=code, items=items, created_at=at
    )
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=["user_id"], set_={"code": code, "items": items, "created_at": at}
        )
    )


async def take_pending(
    session: AsyncSession, *, user_id: str, code: str, newer_than: datetime
) -> list[dict[str, Any]] | None:
    """Remove and return the user's pending import when `code` is its code and it was shown
    after `newer_than`; None otherwise (the pending import then stays, unless expired).
    """
    await session.execute(
        delete(PendingImportRow).where(
            PendingImportRow.user_id == user_id, PendingImportRow.created_at <= newer_than
        )
    )
    taken = await session.scalar(
        delete(PendingImportRow)
        .where(PendingImportRow.user_id == user_id, PendingImportRow.code == code)
        .returning(PendingImportRow.items)
    )
    return list(taken) if taken is not None else None


async def discard_pending(session: AsyncSession, *, user_id: str) -> None:
    """Drop the user's pending import (forget all, account deleted)."""
    await session.execute(delete(PendingImportRow).where(PendingImportRow.user_id == user_id))


async def discard_pending_from_chats(session: AsyncSession, *, chat_ids: Sequence[str]) -> int:
    """Drop pending imports holding an item from one of these chats (deleted chats: the
    text pasted there is not written after the chat is gone). Returns rows dropped.
    """
    if not chat_ids:
        return 0
    result = await session.execute(
        delete(PendingImportRow).where(
            or_(*(PendingImportRow.items.contains([{"source_chat_id": c}]) for c in chat_ids))
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
