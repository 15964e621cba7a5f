"""Audit events: who changed which memory, how, and why (DESIGN §4)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from service.core import redaction
from service.core.records import Memory, OwnerKind
from service.storage.tables import MemoryEventRow, MemoryRow


def snapshot(memory: Memory) -> dict[str, Any]:
    """The audited fields of a memory as JSON; the content redacted of secrets (a row
    written before the current rules must not copy a credential into the trail).
    """
    return {
        "content": redaction.redact(memory.content),
        "bank": memory.bank.value,
        "tags": list(memory.tags),
        "status": memory.status.value,
        "confidence": memory.confidence,
    }


async def record(
    session: AsyncSession,
    *,
    memory_id: uuid.UUID,
    owner_id: str,
    actor: str,
    action: str,
    reason: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> None:
    """Append one audit event (flushed with the change it describes)."""
    session.add(
        MemoryEventRow(
            memory_id=memory_id,
            owner_id=owner_id,
            actor=actor,
            action=action,
            reason=reason,
            before=before,
            after=after,
        )
    )


async def record_created(session: AsyncSession, memory: Memory, *, actor: str, reason: str) -> None:
    """Append the "create" event of a memory just inserted: its snapshot as `after`."""
    await record(
        session,
        memory_id=memory.id,
        owner_id=memory.owner_id,
        actor=actor,
        action="create",
        reason=reason,
        after=snapshot(memory),
    )
    await session.flush()


async def record_created_many(
    session: AsyncSession, added: Sequence[Memory], *, actor: str, reason: str
) -> None:
    """The "create" events of memories just inserted (`record_created` for each), written
    in one batched statement.
    """
    await record_many(
        session,
        [
            {
                "memory_id": m.id,
                "owner_id": m.owner_id,
                "actor": actor,
                "action": "create",
                "reason": reason,
                "before": None,
                "after": snapshot(m),
            }
            for m in added
        ],
    )


async def record_many(session: AsyncSession, events: Sequence[dict[str, Any]]) -> None:
    """Append audit events in one batched INSERT (no ids read back); each a dict of
    `record`'s arguments (memory_id, owner_id, actor, action, reason, before, after).
    """
    if events:
        await session.execute(insert(MemoryEventRow.__table__), list(events))


async def scrub(session: AsyncSession, *, memory_ids: Sequence[uuid.UUID]) -> None:
    """Remove memory content from the audit trail of forgotten memories (keeps who/when/what)."""
    await session.execute(
        update(MemoryEventRow)
        .where(MemoryEventRow.memory_id.in_(list(memory_ids)))
        .values(before=None, after=None)
    )


async def chats_written_by(session: AsyncSession, *, actor: str) -> list[str]:
    """Chat ids whose Chat Memory `actor` (e.g. "user:u1") wrote, from the audit trail."""
    stmt = (
        select(MemoryRow.owner_id)
        .distinct()
        .join(MemoryEventRow, MemoryEventRow.memory_id == MemoryRow.id)
        .where(MemoryRow.owner_kind == OwnerKind.CHAT.value, MemoryEventRow.actor == actor)
        .order_by(MemoryRow.owner_id)
    )
    return [str(c) for c in (await session.execute(stmt)).scalars()]
