"""The loop that keeps per-owner indexes in line with the data (`flows.owner_indexes`).

It runs in every API process that runs workers, LLM or not (full-text and vector search need
none): once at start, then every MEMORY_ANN_REFRESH_S. An advisory lock lets one process at a
time do the work; an error (a lost database) is logged and the next round tries again.
"""

from __future__ import annotations

import asyncio
import logging

from service.flows import owner_indexes
from service.flows.runtime import Runtime

log = logging.getLogger(__name__)

__all__ = ["run_forever", "start"]


async def run_forever(rt: Runtime) -> None:
    """Refresh now and then every `rt.settings.ann_refresh_s` seconds, until cancelled."""
    while True:
        try:
            await owner_indexes.refresh(rt)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("per-owner index refresh failed; trying again later")
        await asyncio.sleep(rt.settings.ann_refresh_s)


def start(rt: Runtime) -> asyncio.Task[None]:
    """The refresh loop as a task (cancel it at shutdown with `supervision.cancel`)."""
    return asyncio.create_task(run_forever(rt), name="owner-indexes")
