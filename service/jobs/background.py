"""Everything a worker process runs besides HTTP: job workers, re-embedding, per-owner indexes.

`serve` starts this in the API process unless MEMORY_RUN_WORKERS=false; `worker` runs only
this. Several processes may run it at once against one PostgreSQL: jobs are taken with row
locks by procrastinate, the daily periodic job is deferred once per period whatever the number
of workers (procrastinate's periodic deferrer inserts with a unique key per period), and the
index loop takes an advisory lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from service.flows import cache_sync, counters
from service.flows import profile as profile_flow
from service.flows import reminders as reminder_flow
from service.flows.runtime import Runtime
from service.flows.turns import requeue_waiting_turns
from service.jobs import owner_indexes as owner_index_jobs
from service.jobs import reembed as reembed_jobs
from service.jobs import supervision
from service.jobs.app import run_workers

__all__ = ["running"]


@contextlib.asynccontextmanager
async def running(rt: Runtime, *, workers: bool) -> AsyncIterator[asyncio.Task[None] | None]:
    """Start the background loops of one process and stop them on exit.

    Args:
        workers: False for an API replica beside separate worker processes: then only the
            start-up checks run (waiting turns get their jobs, other models' vectors are
            dropped) and nothing is executed here.

    Yields:
        The job workers' task (None when `workers` is False), for a caller that waits on it.
    """
    listener = asyncio.create_task(
        cache_sync.run_forever(
            rt.session_url(),
            handlers=[profile_flow.invalidate, reminder_flow.invalidator(rt)],
        ),
        name="cache-notices",
    )
    await _until_listening(listener)
    # this process's counts reach the shared totals every replica reads (flows/counters.py)
    counting = asyncio.create_task(counters.run_forever(rt), name="counters")
    await requeue_waiting_turns(rt)
    reembedding = await reembed_jobs.start(rt, run_workers=workers)
    indexing = owner_index_jobs.start(rt) if workers else None
    job_workers = (
        asyncio.create_task(
            run_workers(rt, concurrency=rt.settings.worker_concurrency), name="workers"
        )
        if workers
        else None
    )
    try:
        yield job_workers
    finally:
        await supervision.cancel(reembedding)
        await supervision.cancel(indexing)
        await supervision.cancel(job_workers)
        await supervision.cancel(listener)
        await supervision.cancel(counting)


LISTEN_WAIT_S = 10.0
"""How long a start waits for the cache-notice listener before going on without it (seconds):
until it connects, cached content is not served (flows/cache_sync.py)."""


async def _until_listening(listener: asyncio.Task[None]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LISTEN_WAIT_S
    while not cache_sync.connected() and not listener.done() and loop.time() < deadline:
        await asyncio.sleep(0.02)
