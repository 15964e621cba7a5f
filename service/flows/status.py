"""The service's state in one sentence and a few counts."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from service.core.records import Status
from service.flows.runtime import Runtime
from service.storage import turns
from service.storage.tables import MemoryRow


async def service_status(rt: Runtime) -> dict[str, Any]:
    """Counts of turns per state and active memories, and a status line."""
    async with rt.db.unit_of_work() as session:
        counts = await turns.counts(session)
        active = (
            await session.execute(
                select(func.count()).where(MemoryRow.status == Status.ACTIVE.value)
            )
        ).scalar_one()
    queued = counts["queued"]
    if not rt.llm.configured:
        line = (
            f"extraction paused: no LLM configured (set LLM_BASE_URL and LLM_MODEL); "
            f"{queued} turns waiting"
        )
    elif queued:
        line = f"extracting: {queued} turns waiting"
    else:
        line = "up to date"
    if counts["failed"]:
        line += f"; {counts['failed']} turns failed"
    return {
        "llm_configured": rt.llm.configured,
        "turns_queued": queued,
        "turns_done": counts["done"],
        "turns_failed": counts["failed"],
        "memories_active": int(active),
        "status": line,
    }
