"""The job queue behind flows' `JobQueue` (flows/runtime.py): procrastinate, seen from here only.

Flows defer jobs through `Runtime.jobs.defer` and never import procrastinate
(tests/unit/test_import_contract.py): the queue library, its exceptions and its options stay
in jobs/, so a flow reads as "queue this task once" and a change of queue touches one layer.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import procrastinate
from procrastinate import exceptions as job_errors

from service.flows.runtime import JobQueueError, Runtime


class ProcrastinateQueue:
    """`JobQueue` on a procrastinate App (jobs/app.py `build_job_app`)."""

    def __init__(self, app: procrastinate.App) -> None:
        self.app = app  #: the App itself, for the workers of jobs/ (run_worker_async)

    async def defer(
        self,
        task: str,
        *,
        queue: str,
        queueing_lock: str | None = None,
        schedule_in_s: float | None = None,
        connection: Any | None = None,
        **args: Any,
    ) -> bool:
        """Queue `task` with keyword `args`; False when a job with the same `queueing_lock`
        is already waiting (nothing is added then).

        Args:
            schedule_in_s: seconds from now before the job may run; None = at once.
            connection: a psycopg connection whose transaction the job joins (None: its own).

        Raises:
            JobQueueError: the queue refused the job (its database call failed).
        """
        options: dict[str, Any] = {"queue": queue, "queueing_lock": queueing_lock}
        if schedule_in_s is not None:
            options["schedule_in"] = {"seconds": schedule_in_s}
        if connection is not None:
            options["connection"] = connection
        try:
            await self.app.configure_task(task, **options).defer_async(**args)
        except job_errors.AlreadyEnqueued:
            return False
        except job_errors.ProcrastinateException as exc:
            raise JobQueueError(str(exc)) from exc
        return True

    def queues(self) -> frozenset[str]:
        """The queue of every registered task."""
        return frozenset(str(task.queue) for task in self.app.tasks.values())

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[ProcrastinateQueue]:
        """Open the queue's connection pool for a `with` block."""
        async with self.app.open_async():
            yield self

    async def close_async(self) -> None:
        """Close the queue's connection pool."""
        await self.app.close_async()


def app_of(rt: Runtime) -> procrastinate.App:
    """The procrastinate App of `rt`'s queue, for the workers.

    Raises:
        TypeError: `rt.jobs` is not a `ProcrastinateQueue` (a Runtime built by hand).
    """
    if not isinstance(rt.jobs, ProcrastinateQueue):
        raise TypeError(f"the runtime's job queue is a {type(rt.jobs).__name__}, not procrastinate")
    return rt.jobs.app
