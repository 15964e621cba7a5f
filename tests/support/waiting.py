"""Polling instead of fixed sleeps: wait until a condition holds, bounded in time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["wait_until"]

POLL_S = 0.02
"""Pause between two checks (seconds)."""


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]], *, timeout_s: float = 60.0, what: str = ""
) -> None:
    """Return as soon as `condition()` is true (it may be a coroutine function).

    Raises:
        AssertionError: it was still false after `timeout_s` seconds (a generous bound: the
            test fails instead of hanging; nothing is asserted about how fast it became true).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if not isinstance(value, bool):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what or 'a condition'} after {timeout_s} s")
        await asyncio.sleep(POLL_S)
