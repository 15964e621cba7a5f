"""Keep this process's caches true to changes made by any service process.

Caches that can serve content (the degraded path's profile texts, the "no reminder pending"
set) are dropped for a user when a NOTIFY about them arrives (`storage.notifications`). While
the listener is not connected, nothing cached may be trusted: the degraded path answers
without a profile and the reminder check queries the database; on every (re)connect the caches
are emptied, since notices sent meanwhile are lost.

Each invalidation also advances `epoch()`: a reader that filled a cache from a database read
checks the epoch it started with, so a notice that arrives between its read and its cache
write is never overwritten by the older value.

Caches that need no notice: query vectors (keyed by text), LLM relevance scores (keyed by the
memory's version), the per-owner index names (a stale list only picks a slower plan; SQL
falls back to the exact scan).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from service.storage import notifications

log = logging.getLogger(__name__)

__all__ = ["Handler", "connected", "epoch", "run_forever"]

RECONNECT_FIRST_S = 0.5
"""Pause before listening again after a lost connection (seconds); doubles up to the max."""
RECONNECT_MAX_S = 10.0

#: drops what a Change makes stale; None means "drop everything"
Handler = Callable[[notifications.Change | None], None]

# Process-wide, like the profile texts cache it guards: listeners connected now, and the
# invalidation counter. (Tests run several services in one process; each has a listener.)
_state = {"listeners": 0, "epoch": 0}


def connected() -> bool:
    """True while notices reach this process (cached content may then be served)."""
    return _state["listeners"] > 0


def epoch() -> int:
    """A counter advanced by every invalidation (see the module docstring)."""
    return _state["epoch"]


def _apply(handlers: list[Handler], change: notifications.Change | None) -> None:
    _state["epoch"] += 1
    for handler in handlers:
        handler(change)


async def run_forever(conninfo: str, *, handlers: list[Handler]) -> None:
    """Listen until cancelled, reconnecting after a lost connection with a growing pause.

    Args:
        conninfo: libpq URL of a direct (not pooled) connection.
        handlers: the invalidations of this process's caches.
    """
    pause_s = RECONNECT_FIRST_S
    while True:
        listening = False
        try:
            async with notifications.listening(conninfo) as changes:
                _apply(handlers, None)  # notices sent while not listening are lost
                _state["listeners"] += 1
                listening = True
                pause_s = RECONNECT_FIRST_S
                async for change in changes:
                    _apply(handlers, change)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("cache notices lost (%s); listening again in %.1f s", exc, pause_s)
        finally:
            if listening:
                _state["listeners"] -= 1
            _apply(handlers, None)
        await asyncio.sleep(pause_s)
        pause_s = min(pause_s * 2, RECONNECT_MAX_S)
