"""A changed embedding model, of any dimension: re-embed in the background, keyword meanwhile.

The `embedding` column holds vectors of any dimension (migration 0006), and only vectors of
the loaded model are ever compared. When the model changes (another name, whatever its
dimension):

1. at start, `prepare` drops the vectors made by another model (two models' spaces cannot be
   compared, and vectors of different dimensions cannot be compared at all) and queues a
   `reembed_memories` job when memories wait;
2. the job embeds them in batches with the loaded model, skipping memories edited or
   forgotten meanwhile, and queues a follow-up job when its time budget runs out;
3. meanwhile those memories are found by keyword search (full text needs no vector) and new
   memories are stored with the new model's vectors at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from service.flows.runtime import Runtime
from service.storage import vectors

log = logging.getLogger(__name__)

__all__ = ["REEMBED_QUEUE", "REEMBED_TASK", "ReembedProgress", "defer", "prepare", "run_reembed"]

REEMBED_TASK = "reembed_memories"
REEMBED_QUEUE = "reembed"
BATCH_SIZE = 64
"""Memories embedded and stored per transaction."""
JOB_BUDGET_S = 120.0
"""Seconds one job works before it hands the rest to a follow-up job."""
JOB_MAX_BATCHES = 1_000
"""Upper bound of batches per job, whatever the clock says."""


@dataclass(frozen=True, slots=True)
class ReembedProgress:
    """What one re-embedding run did."""

    stored: int  #: vectors written
    remaining: int  #: memories still waiting afterwards


async def prepare(rt: Runtime) -> int:
    """At start: drop other models' vectors and queue re-embedding when memories wait.

    Returns:
        Memories waiting for a vector of the loaded model (0: nothing to do).
    """
    model = rt.encoder.model_name
    async with rt.db.unit_of_work() as session:
        cleared = await vectors.clear_foreign(session, model=model)
        waiting = await vectors.count_pending(session, model=model)
    if cleared:
        log.warning(
            "the embedding model is now %s: %d memories will be re-embedded in the "
            "background (keyword search finds them meanwhile)",
            model,
            cleared,
        )
    if waiting:
        await defer(rt)
    return waiting


async def defer(rt: Runtime) -> None:
    """Queue one re-embedding job (a second waiting one is not added)."""
    if not await rt.jobs.defer(REEMBED_TASK, queue=REEMBED_QUEUE, queueing_lock=REEMBED_TASK):
        log.debug("a re-embedding job is already waiting")


async def run_reembed(
    rt: Runtime,
    *,
    batch_size: int = BATCH_SIZE,
    budget_s: float = JOB_BUDGET_S,
    max_batches: int = JOB_MAX_BATCHES,
) -> ReembedProgress:
    """Embed waiting memories with the loaded model, batch by batch, within a budget.

    Args:
        batch_size: memories per batch (one read, one encode, one write transaction).
        budget_s: seconds after which no new batch is started.
        max_batches: most batches, whatever the clock says.
    """
    model = rt.encoder.model_name
    deadline = time.monotonic() + budget_s
    stored = 0
    for _ in range(max_batches):
        async with rt.db.unit_of_work() as session:
            batch = await vectors.pending_batch(session, model=model, limit=batch_size)
        if not batch:
            break
        embedded = await rt.encoder.encode([m.content for m in batch], bulk=True)
        async with rt.db.unit_of_work() as session:
            written = await vectors.store_vectors(
                session, items=batch, vectors=embedded, model=model
            )
        stored += written
        if written == 0 or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0)  # let the API's requests in between batches
    async with rt.db.unit_of_work() as session:
        remaining = await vectors.count_pending(session, model=model)
    log.info("re-embedded %d memories with %s; %d waiting", stored, model, remaining)
    return ReembedProgress(stored=stored, remaining=remaining)
