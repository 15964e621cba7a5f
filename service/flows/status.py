"""The service's state in one sentence and a few counts."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from cachetools import TTLCache

from service.core.commands import counted
from service.flows import counters
from service.flows.runtime import Runtime
from service.observability import ScrapeState
from service.storage import admin, turns, vectors

log = logging.getLogger(__name__)


async def service_status(rt: Runtime) -> dict[str, Any]:
    """Counts of turns per state and active memories, and a status line."""
    async with rt.db.unit_of_work() as session:
        counts = await turns.counts(session)
        active = await admin.count_active_memories(session)
    queued = counts["queued"]
    if not rt.llm.configured:
        line = (
            f"extraction paused: no LLM configured (set LLM_BASE_URL and LLM_MODEL); "
            f"{counted(queued, 'turn', 'turns')} waiting"
        )
    elif queued and (failure := await counters.last_llm_failure(rt)) is not None:
        # the workers may be other processes: their latest failure comes from the database
        line = (
            f"{failure.sentence} at {failure.at:%Y-%m-%d %H:%M:%S} UTC; "
            f"{counted(queued, 'turn', 'turns')} waiting"
        )
    elif queued:
        line = f"extracting: {counted(queued, 'turn', 'turns')} waiting"
    else:
        line = "up to date"
    if counts["failed"]:
        line += f"; {counted(counts['failed'], 'turn', 'turns')} failed"
    return {
        "llm_configured": rt.llm.configured,
        "turns_queued": queued,
        "turns_done": counts["done"],
        "turns_failed": counts["failed"],
        "memories_active": int(active),
        "status": line,
        **_configuration(rt),
    }


def _configuration(rt: Runtime) -> dict[str, str | None]:
    """Where this service's LLM and database are, without users or passwords."""
    settings = rt.settings
    llm = urlsplit(settings.llm_base_url or "")
    db = urlsplit(settings.database_url or "")
    return {
        "llm_model": settings.llm_model,
        "llm_endpoint": f"{llm.hostname}:{llm.port or ''}".rstrip(":") if llm.hostname else None,
        "database": (
            f"{db.hostname or 'local socket'}{f':{db.port}' if db.port else ''}{db.path}"
            if settings.database_url
            else f"embedded PostgreSQL in {settings.state_dir / 'pgdata'}"
        ),
        "database_pooler": settings.database_pooler,
    }


#: how long one count of failed turns serves the admins' status line, in seconds: the
#: notice is not worth a COUNT over the turns table on every turn
FAILED_COUNT_TTL_S = 60.0
_failed_counts: TTLCache[int, int] = TTLCache(maxsize=8, ttl=FAILED_COUNT_TTL_S)


async def failed_turns(rt: Runtime) -> int:
    """Turns whose extraction failed for good ("parked"), counted at most once a minute."""
    key = id(rt)
    found = _failed_counts.get(key)
    if found is None:
        async with rt.db.unit_of_work() as session:
            found = (await turns.counts(session))["failed"]
        _failed_counts[key] = found
    return found


def admin_notice(*, llm_configured: bool, failed: int) -> str | None:
    """The status line for admins only (ordinary users can do nothing about these), or None.

    Args:
        llm_configured: False while no LLM is set: turns wait.
        failed: turns whose extraction failed for good.
    """
    parts = []
    if not llm_configured:
        parts.append(
            "turns are kept, but learning waits until the memory service has an LLM "
            "(LLM_BASE_URL, LLM_MODEL); `python -m service doctor` checks it"
        )
    if failed:
        parts.append(
            f"{counted(failed, 'turn', 'turns')} failed extraction "
            "(`python -m service turns list`, then `turns retry-failed`)"
        )
    return "Memory (admins only): " + "; ".join(parts) if parts else None


async def read_metrics_state(rt: Runtime, state: ScrapeState) -> None:
    """Fill `state` (the /metrics gauges) from the database; on failure mark it down and
    keep the old numbers.
    """
    try:
        async with rt.db.unit_of_work() as session:
            state.turns = await turns.counts(session)
            found = await admin.job_counts(session)
            state.without_vector = await vectors.count_pending(session, model=rt.encoder.model_name)
        state.shared = await counters.totals(rt)
        # every queue of a registered task is shown, at 0 when empty
        queues = rt.jobs.queues()
        state.jobs = {
            (q, st): found.get((q, st), 0) for q in queues for st in ("todo", "doing", "scheduled")
        }
        state.jobs.update(found)
        state.database_up = 1
    except Exception:  # a scrape must answer while the database is away
        log.warning("metrics: the database could not be read")
        state.database_up = 0
