"""Keep a long-running worker loop alive across database outages.

A procrastinate worker stops with an exception when its database connection breaks (a
PostgreSQL restart, a failover): its fetch loop raises, and a failed listener stops it too.
Without a restart the API would come back with the database while accepted turns waited
forever. `keep_running` starts the loop again after a growing pause; jobs the dead worker
left running are picked up again by the stalled-job recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

__all__ = ["FIRST_PAUSE_S", "MAX_PAUSE_S", "cancel", "keep_running"]

FIRST_PAUSE_S = 1.0
"""Pause before the first restart (seconds); it doubles at each failure in a row."""
MAX_PAUSE_S = 30.0
"""Longest pause between two restarts (seconds)."""
HEALTHY_AFTER_S = 60.0
"""A run that lasted this long resets the pause to FIRST_PAUSE_S (seconds)."""


async def keep_running(start: Callable[[], Awaitable[None]], *, name: str) -> None:
    """Await `start()` again and again until the task is cancelled.

    A procrastinate worker that loses its listener stops *without* an exception, so an
    ordinary return is a stop too; only cancellation ends this.

    Args:
        start: makes and awaits one run of the loop (e.g. `app.run_worker_async(...)`).
        name: what the loop is, for the log.
    """
    pause_s = FIRST_PAUSE_S
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        reason = "it returned"
        try:
            await start()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}".strip()
        if loop.time() - started >= HEALTHY_AFTER_S:
            pause_s = FIRST_PAUSE_S
        log.warning("%s stopped (%s); starting it again in %.0f s", name, reason, pause_s)
        await asyncio.sleep(pause_s)
        pause_s = min(pause_s * 2, MAX_PAUSE_S)


async def cancel(task: asyncio.Task[None] | None) -> None:
    """Cancel a background loop at shutdown and wait for it (no-op for None or a finished
    task; whatever it raises while stopping is swallowed, the service is going down).
    """
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
