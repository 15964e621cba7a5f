"""The summarizer's job tasks (DESIGN §8), registered on the service's procrastinate App.

- `summarize_all` runs every day at 03:00 (UTC, the database's clock) as a procrastinate
  periodic task: every worker runs the periodic deferrer, and procrastinate defers a
  period's job once however many workers there are.
- `consolidate_owner` is queued by the limit trigger after an extraction (one waiting job
  per owner, by queueing lock).

Both run on the `consolidation` queue and are thin: they take the Runtime from the worker's
context and call `flows.consolidation`.
"""

from __future__ import annotations

import procrastinate

from service.flows import consolidation
from service.flows.runtime import Runtime

__all__ = ["DAILY_CRON", "DAILY_PERIODIC_ID", "QUEUE", "register"]

DAILY_CRON = "0 3 * * *"
"""When the daily summarizer runs (minute hour day month weekday, UTC)."""
DAILY_PERIODIC_ID = "daily_summarizer"
QUEUE = consolidation.CONSOLIDATION_QUEUE
"""The queue both tasks run on; workers must listen to it."""


def register(app: procrastinate.App) -> None:
    """Register `summarize_all` (periodic) and `consolidate_owner` on `app`."""

    @app.periodic(cron=DAILY_CRON, periodic_id=DAILY_PERIODIC_ID)
    @app.task(
        name=consolidation.SUMMARIZE_ALL_TASK,
        queue=consolidation.CONSOLIDATION_QUEUE,
        pass_context=True,
    )
    async def summarize_all(context: procrastinate.JobContext, timestamp: int) -> None:
        rt: Runtime = context.additional_context["runtime"]
        await consolidation.run_daily(rt, timestamp=timestamp)

    @app.task(
        name=consolidation.CONSOLIDATE_OWNER_TASK,
        queue=consolidation.CONSOLIDATION_QUEUE,
        pass_context=True,
    )
    async def consolidate_owner(
        context: procrastinate.JobContext, owner_kind: str, owner_id: str
    ) -> None:
        rt: Runtime = context.additional_context["runtime"]
        await consolidation.run_limit(rt, owner_kind=owner_kind, owner_id=owner_id)

    del summarize_all, consolidate_owner
