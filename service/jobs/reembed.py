"""The re-embedding job (a changed embedding model) and its start-up drain worker.

`reembed_memories` runs on the `reembed` queue and is thin: it calls
`flows.reembed.run_reembed` and queues a follow-up job while memories still wait and progress
was made. It takes no procrastinate lock: a job left "doing" by a killed worker would hold
it, and two runs side by side only repeat some work (a vector is stored where the memory is
unchanged, whoever computed it).

Extraction workers only run when an LLM is configured, but re-embedding needs none: `start`
runs a worker for this queue alone that stops once the queue is empty.
"""

from __future__ import annotations

import asyncio
import logging

import procrastinate

from service.flows import reembed
from service.flows.runtime import Runtime
from service.jobs.queue import app_of

log = logging.getLogger(__name__)

QUEUE = reembed.REEMBED_QUEUE
"""The queue of the re-embedding job; workers must listen to it."""


def register(app: procrastinate.App) -> None:
    """Register `reembed_memories` on `app`."""

    @app.task(
        name=reembed.REEMBED_TASK,
        queue=QUEUE,
        pass_context=True,
        retry=procrastinate.RetryStrategy(max_attempts=5, exponential_wait=4),
    )
    async def reembed_memories(context: procrastinate.JobContext) -> None:
        rt: Runtime = context.additional_context["runtime"]
        progress = await reembed.run_reembed(rt)
        if progress.remaining and progress.stored:
            await reembed.defer(rt)

    del reembed_memories


async def start(rt: Runtime, *, run_workers: bool) -> asyncio.Task[None] | None:
    """Queue re-embedding if memories wait, and drain that queue in the background.

    Args:
        run_workers: False when this process runs no job workers (separate worker
            processes then do the work).

    Returns:
        The drain worker's task (cancel it at shutdown with `supervision.cancel`), or None.
    """
    waiting = await reembed.prepare(rt)
    if not waiting or not run_workers:
        return None
    return asyncio.create_task(
        app_of(rt).run_worker_async(
            queues=[QUEUE],
            concurrency=1,
            wait=False,
            install_signal_handlers=False,
            additional_context={"runtime": rt},
            delete_jobs="successful",
            name="reembed",
            listen_notify=False,
            shutdown_graceful_timeout=5.0,
        ),
        name="reembed-worker",
    )
