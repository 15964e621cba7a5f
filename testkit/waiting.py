"""Polling instead of sleeping: the one way tests wait for something another thread, process
or background task does. A busy machine makes a poll slower, never wrong.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TypeVar, overload

T = TypeVar("T")

POLL_INTERVAL_S = 0.1
"""Between two looks: short enough to add little to a test, long enough to load nothing."""

DEFAULT_TIMEOUT_S = 60.0
"""How long a poll waits unless told: far past any wait a loaded 2-core machine shows, well
under the suite's per-test timeout (pyproject.toml), so a real hang names what it waited for."""


def wait_until(
    condition: Callable[[], T | None],
    *,
    what: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    interval_s: float = POLL_INTERVAL_S,
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    """Call `condition` until it returns something truthy, and return that.

    Args:
        what: what is awaited, for the error ("summary version 2").
        ignoring: exceptions that count as "not yet" (a server still restarting).

    Raises:
        TimeoutError: after `timeout_s` seconds, naming `what` and the last value seen.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except ignoring as exc:
            value = exc  # type: ignore[assignment]
        else:
            if value:
                return value
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"gave up after {timeout_s:g} s waiting for {what} (last: {value!r})"
            )
        time.sleep(interval_s)


@overload
async def wait_until_async(
    condition: Callable[[], Awaitable[T]],
    *,
    what: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    interval_s: float = POLL_INTERVAL_S,
) -> T: ...


@overload
async def wait_until_async(
    condition: Callable[[], T],
    *,
    what: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    interval_s: float = POLL_INTERVAL_S,
) -> T: ...


async def wait_until_async(
    condition: Callable[[], Awaitable[T] | T],
    *,
    what: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    interval_s: float = POLL_INTERVAL_S,
) -> T:
    """`wait_until` on the event loop: `condition` may be a coroutine function or a plain
    one; the loop runs between looks.

    Raises:
        TimeoutError: after `timeout_s` seconds, naming `what` and the last value seen.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"gave up after {timeout_s:g} s waiting for {what} (last: {value!r})"
            )
        await asyncio.sleep(interval_s)


class LoopLag:
    """How long the running event loop was kept from running on time while a block ran.

    A ticker task asks to wake every TICK_S and adds up how late each wake-up came (and the
    lateness still pending at exit). Time the loop could not run — other processes on the
    cores, other threads holding the GIL — shows up here; time the code under test spends
    waiting on a timer does not. `elapsed − lag` is therefore the block's duration on the
    loop's own clock, the measure of a contract such as "the inlet stops waiting after its
    valve", whatever the machine's load. `async with LoopLag() as lag: ...; lag.lag_s`.
    """

    TICK_S = 0.01

    def __init__(self) -> None:
        self.lag_s = 0.0
        self._planned = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopLag:
        loop = asyncio.get_running_loop()
        self._planned = loop.time() + self.TICK_S
        self._task = asyncio.ensure_future(self._tick(loop))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.lag_s += max(0.0, loop.time() - self._planned)
        if self._task is not None:
            self._task.cancel()

    async def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            await asyncio.sleep(max(0.0, self._planned - loop.time()))
            self.lag_s += max(0.0, loop.time() - self._planned)
            self._planned = loop.time() + self.TICK_S
