"""A memory replaced by a new version: the supersede and its audit event, written together.

Extraction's UPDATE and the rolling chat summary both store a new memory and retire the one
it replaces this way; the old row stays as history (DESIGN §5.6).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from service.core.records import Memory
from service.storage import audit, memories


async def supersede(
    session: AsyncSession, *, old: Memory, new: Memory, at: datetime, actor: str
) -> bool:
    """Mark `old` superseded by `new` (only at the version read) and audit it.

    Args:
        old: the memory replaced, as read (its version is the one expected).
        new: its successor, already inserted in this unit of work.
        at: the change's time (tz-aware).
        actor: who changed it, for the audit trail.

    Returns:
        True when `old` changed; False when it was forgotten, edited or retired meanwhile
        (the audit event is written either way, as before this helper existed).
    """
    changed = await memories.supersede(
        session, memory_id=old.id, successor_id=new.id, at=at, expected_version=old.version
    )
    await audit.record(
        session,
        memory_id=old.id,
        owner_id=old.owner_id,
        actor=actor,
        action="supersede",
        reason=f"updated by {new.id}",
        before=audit.snapshot(old),
    )
    return changed
