"""What every process counted, added up in the database so separate workers show in any
replica's /metrics and /v1/status (workers serve no HTTP).

Each process keeps its prometheus counters (observability) and, every `COUNTER_FLUSH_S`, adds
what they grew by since its last flush to the table service_counters; a scrape or a status
read sums nothing itself, it reads those rows.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from datetime import datetime

from service import observability
from service.errors import LLMUnavailable
from service.flows.runtime import Runtime
from service.storage import counters

log = logging.getLogger(__name__)

__all__ = [
    "COUNTER_FLUSH_S",
    "LLMFailure",
    "flush",
    "last_llm_failure",
    "llm_failure",
    "run_forever",
    "totals",
]

COUNTER_FLUSH_S = 5.0
"""Seconds between two flushes of one process: how late a worker's count can show."""

_flushed: dict[tuple[str, str], int] = {}
"""(name, label) → the value this process had added to the database at its last flush."""

_LLM_ANSWERED = frozenset({"written", "nothing_new", "invalid_output"})
"""Extraction outcomes that mean the LLM answered (already_done and gave_up call no LLM)."""

_HTTP_STATUS = re.compile(r"HTTP (\d{3})")


def llm_failure(exc: LLMUnavailable) -> tuple[str, str]:
    """(cause, sentence) of an LLM failure: `http_503` and "the LLM answered HTTP 503",
    `unreachable`, or `bad_answer`. The sentence carries no body text of the answer.
    """
    text = str(exc)
    status = _HTTP_STATUS.search(text)
    if status:
        return f"http_{status.group(1)}", f"the LLM answered HTTP {status.group(1)}"
    if "unreachable" in text:
        return "unreachable", "the LLM was unreachable"
    return "bad_answer", "the LLM's answer was not a chat completion"


def record_llm_failure(exc: LLMUnavailable) -> None:
    """Count `exc` as this process's latest LLM failure (shared at the next flush)."""
    observability.record_llm_failure(*llm_failure(exc))


async def flush(rt: Runtime) -> int:
    """Add what this process counted since its last flush to the shared totals.

    Returns:
        how many (name, label) rows grew.
    """
    deltas = []
    # claimed before the write (no await in between), so two flushes of one process never
    # add the same counts; a failed write gives them back for the next try
    for key, (value, at, detail) in observability.shared_counts().items():
        delta = value - _flushed.get(key, 0)
        if delta > 0:
            deltas.append(counters.CounterDelta(key[0], key[1], delta, at, detail))
            _flushed[key] = value
    if not deltas:
        return 0
    try:
        async with rt.db.unit_of_work() as session:
            await counters.add(session, deltas)
    except BaseException:
        for d in deltas:
            _flushed[(d.name, d.label)] -= d.delta
        raise
    return len(deltas)


async def run_forever(rt: Runtime, interval_s: float = COUNTER_FLUSH_S) -> None:
    """Flush every `interval_s` until cancelled, and once more when cancelled."""
    try:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await flush(rt)
            except Exception:  # the database may be away; the counts wait for the next try
                log.warning("counters: could not add this process's counts to the database")
    finally:
        try:
            await asyncio.shield(flush(rt))
        except Exception:
            log.warning("counters: the last flush failed; this process's latest counts are lost")


async def totals(rt: Runtime) -> dict[tuple[str, str], int]:
    """The installation's totals: (name, label) → value."""
    async with rt.db.reads() as session:
        return {(t.name, t.label): t.value for t in await counters.totals(session)}


@dataclass(frozen=True, slots=True)
class LLMFailure:
    """The latest LLM failure of any process, when no extraction finished after it."""

    sentence: str  #: "the LLM answered HTTP 503"
    at: datetime


async def last_llm_failure(rt: Runtime) -> LLMFailure | None:
    """The latest LLM failure of the installation if no extraction finished after it, else
    None (the LLM has answered since).
    """
    async with rt.db.reads() as session:
        rows = await counters.totals(session)
    failures = [r for r in rows if r.name == "llm_failures" and r.last_at is not None]
    if not failures:
        return None
    latest = max(failures, key=lambda r: r.last_at or datetime.min)
    finished = [
        r.last_at
        for r in rows
        if r.name == "extraction_outcomes" and r.label in _LLM_ANSWERED and r.last_at is not None
    ]
    if latest.last_at is None or (finished and max(finished) > latest.last_at):
        return None
    return LLMFailure(latest.detail or "the LLM failed", latest.last_at)
