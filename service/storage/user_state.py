"""Per-user switches and the record of what was injected into each chat's last turn."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage.tables import InjectionRow, UserSettingsRow


async def is_paused(session: AsyncSession, *, user_id: str) -> bool:
    """True when the user paused learning (`/memory pause`)."""
    row = await session.get(UserSettingsRow, user_id)
    return bool(row and row.paused)


async def set_paused(session: AsyncSession, *, user_id: str, paused: bool, at: datetime) -> None:
    """Pause or resume learning for a user."""
    stmt = pg_insert(UserSettingsRow).values(user_id=user_id, paused=paused, updated_at=at)
    await session.execute(stmt.on_conflict_do_update(
        index_elements=["user_id"], set_={"paused": paused, "updated_at": at}))


async def record_injection(
    session: AsyncSession, *, user_id: str, chat_id: str, at: datetime, items: list[dict[str, Any]]
) -> None:
    """Remember which memories (ids, similarity, score) went into this chat's latest turn."""
    stmt = pg_insert(InjectionRow.__table__).values(user_id=user_id, chat_id=chat_id, at=at,
                                                    items=items)
    await session.execute(stmt.on_conflict_do_update(
        index_elements=["user_id", "chat_id"], set_={"at": at, "items": items}))


async def last_injection(
    session: AsyncSession, *, user_id: str, chat_id: str | None
) -> tuple[datetime, list[dict[str, Any]]] | None:
    """The latest injection in `chat_id`, or the user's latest anywhere when None/unknown."""
    stmt = select(InjectionRow).where(InjectionRow.user_id == user_id)
    if chat_id:
        row = (await session.execute(stmt.where(InjectionRow.chat_id == chat_id))).scalar()
        if row is not None:
            return row.at, list(row.items)
    row = (await session.execute(stmt.order_by(InjectionRow.at.desc()).limit(1))).scalar()
    return (row.at, list(row.items)) if row else None


async def remove_user(session: AsyncSession, *, user_id: str) -> None:
    """Delete a user's switches and injection records (their account was deleted)."""
    await session.execute(delete(UserSettingsRow).where(UserSettingsRow.user_id == user_id))
    await session.execute(delete(InjectionRow).where(InjectionRow.user_id == user_id))
