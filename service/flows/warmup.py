"""Ready means warm (issue 26): before `/readyz` says ready, the inlet's path has run once.

The first embedding pays onnxruntime's first-run allocations and the first read pays the
connection pool's connects, the statements' first compilation and PostgreSQL's cold caches
(together 1–2 s on a fresh start: a first turn that would pass the filter's deadline). One
inlet for a user nobody is, in a saved chat, runs every step of the real one — query
embedding, reminders, profile or core memories, hybrid ranking — and writes nothing (there
is nothing to find, so nothing is recorded as used and no reminder fires).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from service.core.records import ChatContext, ChatKind
from service.flows import context, planted_check
from service.flows.runtime import Runtime

__all__ = ["RETRY_S", "WARM_UP_USER", "run", "warm_up"]

log = logging.getLogger(__name__)

WARM_UP_USER = "memory-service:warm-up"
"""The sender of the warm-up inlet: an id Open WebUI never gives (it holds a colon and a
space-free prefix no user id has), so it owns no memory."""

RETRY_S = 1.0
"""Between two warm-up attempts when one failed (the database is still starting)."""


async def warm_up(rt: Runtime) -> None:
    """One inlet of the read path, as `/v1/context` runs it (see the module docstring).

    Raises:
        Whatever the read path raises (the database is not reachable yet).
    """
    chat = ChatContext(user_id=WARM_UP_USER, kind=ChatKind.SAVED, chat_id=WARM_UP_USER)
    await context.build_context(
        rt,
        chat=chat,
        message=f"warm-up of the read path at {datetime.now(UTC).isoformat()}",
        budget_tokens=None,
        now=None,
    )
    # the write path's one cold step: the planted-instruction check's labelled examples
    await planted_check.warm(rt)


async def run(rt: Runtime) -> None:
    """Warm the read path until it worked once, then mark the runtime warm (`rt.warm`)."""
    while True:
        try:
            await warm_up(rt)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("warm-up of the read path failed (%s); trying again", exc)
            await asyncio.sleep(RETRY_S)
            continue
        rt.warm = True
        log.info("read path warm: ready")
        return
