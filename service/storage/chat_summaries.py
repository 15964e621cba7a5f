"""Where each chat's rolling summary stands: its current memory and the last message it covers."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage.tables import ChatSummaryRow

__all__ = ["ChatSummaryState", "get", "lock_chat", "save"]


@dataclass(frozen=True, slots=True)
class ChatSummaryState:
    """The link of a chat to its summary."""

    chat_id: str  #: the chat
    memory_id: uuid.UUID  #: current version of the summary (a Chat Memory)
    last_message_hash: str  #: message hash of the last turn it covers
    last_turn_id: int  #: ledger id of that turn
    turns_covered: int  #: turns taken in over all versions
    versions: int  #: updates so far (1 = the first summary)
    updated_at: datetime  #: when the current version was written


async def lock_chat(session: AsyncSession, *, chat_id: str) -> None:
    """Serialize summary updates of one chat until the transaction ends (advisory lock).

    Senders of a shared chat are extracted in parallel; their summary updates take turns.
    """
    await session.execute(
        select(func.pg_advisory_xact_lock(func.hashtextextended("memory-chat:" + chat_id, 0)))
    )


async def get(session: AsyncSession, *, chat_id: str) -> ChatSummaryState | None:
    """The chat's summary link, or None when the chat has no summary yet."""
    row = (
        await session.execute(select(ChatSummaryRow).where(ChatSummaryRow.chat_id == chat_id))
    ).scalar()
    if row is None:
        return None
    return ChatSummaryState(
        row.chat_id,
        row.memory_id,
        row.last_message_hash,
        row.last_turn_id,
        row.turns_covered,
        row.versions,
        row.updated_at,
    )


async def save(
    session: AsyncSession,
    *,
    chat_id: str,
    memory_id: uuid.UUID,
    last_message_hash: str,
    last_turn_id: int,
    turns_added: int,
    at: datetime,
) -> None:
    """Point the chat at a new summary version that covers `turns_added` more turns."""
    stmt = pg_insert(ChatSummaryRow).values(
        chat_id=chat_id,
        memory_id=memory_id,
        last_message_hash=last_message_hash,
        last_turn_id=last_turn_id,
        turns_covered=turns_added,
        versions=1,
        updated_at=at,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=["chat_id"],
        set_={
            "memory_id": memory_id,
            "last_message_hash": last_message_hash,
            "last_turn_id": last_turn_id,
            "updated_at": at,
            "turns_covered": ChatSummaryRow.turns_covered + turns_added,
            "versions": ChatSummaryRow.versions + 1,
        },
    )
    await session.execute(stmt)
