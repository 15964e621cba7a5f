"""Per-user switches and the record of what was injected into each chat's last turn."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, any_, bindparam, delete, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage.tables import InjectionRow, MemoryRow, UserSettingsRow


async def is_paused(session: AsyncSession, *, user_id: str) -> bool:
    """True when the user paused learning (`/memory pause`)."""
    row = await session.get(UserSettingsRow, user_id)
    return bool(row and row.paused)


async def set_paused(session: AsyncSession, *, user_id: str, paused: bool, at: datetime) -> None:
    """Pause or resume learning for a user."""
    stmt = pg_insert(UserSettingsRow).values(user_id=user_id, paused=paused, updated_at=at)
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=["user_id"], set_={"paused": paused, "updated_at": at}
        )
    )


async def record_use(
    session: AsyncSession,
    *,
    user_id: str,
    chat_id: str | None,
    memory_ids: Sequence[uuid.UUID],
    items: list[dict[str, Any]],
    at: datetime,
) -> None:
    """After a turn: the injected memories' last use, and (in a chat) what went into it.

    One prebuilt statement (the UPDATE runs as a data-modifying CTE of the upsert): it is
    written after every reply, so a second round trip, or building the statement each
    time, would cost every turn.

    Args:
        memory_ids: the injected memories; their `last_used_at` becomes `at` unless later.
        items: per memory {"seq", "similarity", "score"}, kept for `/memory why`.
    """
    params = {"ids": list(memory_ids), "at": at}
    if chat_id is None:
        await session.execute(_MARK_USED, params)
    else:
        await session.execute(
            _MARK_USED_AND_RECORD, params | {"user_id": user_id, "chat_id": chat_id, "items": items}
        )


def _record_use_statements() -> tuple[Any, Any]:
    memories = MemoryRow.__table__
    at = bindparam("at", type_=DateTime(timezone=True))
    used = (
        update(memories)
        .where(
            memories.c.id == any_(bindparam("ids", type_=ARRAY(PG_UUID(as_uuid=True)))),
            or_(memories.c.last_used_at.is_(None), memories.c.last_used_at < at),
        )
        .values(last_used_at=at)
    )
    items = bindparam("items", type_=JSONB)
    upsert = pg_insert(InjectionRow.__table__).values(
        user_id=bindparam("user_id"), chat_id=bindparam("chat_id"), at=at, items=items
    )
    return used, upsert.on_conflict_do_update(
        index_elements=["user_id", "chat_id"],
        set_={"at": at, "items": items},
    ).add_cte(used.cte("used"))


_MARK_USED, _MARK_USED_AND_RECORD = _record_use_statements()


async def last_injection(
    session: AsyncSession, *, user_id: str, chat_id: str | None
) -> tuple[datetime, list[dict[str, Any]]] | None:
    """The latest injection in `chat_id`; None without one (never another chat's)."""
    if not chat_id:
        return None
    stmt = select(InjectionRow).where(
        InjectionRow.user_id == user_id, InjectionRow.chat_id == chat_id
    )
    row = (await session.execute(stmt)).scalar()
    return (row.at, list(row.items)) if row else None


async def remove_user(session: AsyncSession, *, user_id: str) -> None:
    """Delete a user's switches and injection records (their account was deleted)."""
    await session.execute(delete(UserSettingsRow).where(UserSettingsRow.user_id == user_id))
    await session.execute(delete(InjectionRow).where(InjectionRow.user_id == user_id))
