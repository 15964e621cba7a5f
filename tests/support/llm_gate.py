"""A gate in front of the LLM stand-in's responder: hold calls mid-flight, then release them.

Race tests hold an extraction inside its LLM call, run a forget, an edit, a deletion or another
extraction against it, and only then let the answer through:

    gate = LLMGate(responder)
    stub.responder = gate
    gate.close()                        # calls from now on wait inside the stub
    task = asyncio.create_task(run_extraction(...))
    await gate.wait_arrived(1)          # the extraction is waiting for its answer
    ...                                 # the racing operation
    gate.release()                      # one waiting call answers (open() lets all through)
    await task

A call waits in the stub's request thread (the stub serves each request in its own thread),
so held calls block nothing else. `hold_only` limits the gate to some requests (e.g.
extraction requests, not rolling-summary ones); the others always pass.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from testkit.llm_stub import Responder
from testkit.waiting import wait_until_async as wait_until

__all__ = ["LLMGate"]

HOLD_LIMIT_S = 120.0
"""A held call answers 500 after this long, so a test that forgot to release cannot hang."""


class LLMGate:
    """A responder that passes calls to `responder`, holding them while the gate is closed.

    Args:
        responder: produces the answers.
        hold_only: which requests the gate may hold; None = every request.
    """

    def __init__(
        self, responder: Responder, *, hold_only: Callable[[dict[str, Any]], bool] | None = None
    ) -> None:
        self.responder = responder
        self._hold_only = hold_only
        self._cond = threading.Condition()
        self._open = True
        self._tickets = 0
        self._arrived = 0
        self._waiting = 0
        self._answered = 0

    def close(self) -> None:
        """Hold every call arriving from now on until `release` or `open`."""
        with self._cond:
            self._open = False

    def open(self) -> None:
        """Let every held and future call through."""
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def release(self, count: int = 1) -> None:
        """Let `count` held (or future) calls through, oldest first; the gate stays closed."""
        with self._cond:
            self._tickets += count
            self._cond.notify_all()

    @property
    def arrived(self) -> int:
        """Calls that reached the gate (held or not) so far."""
        with self._cond:
            return self._arrived

    @property
    def waiting(self) -> int:
        """Calls held at this moment."""
        with self._cond:
            return self._waiting

    @property
    def answered(self) -> int:
        """Calls that got through (answered) so far."""
        with self._cond:
            return self._answered

    async def wait_arrived(self, count: int, *, timeout_s: float = 60.0) -> None:
        """Return once `count` calls reached the gate; AssertionError after `timeout_s`."""
        await wait_until(lambda: self.arrived >= count, timeout_s=timeout_s, what="LLM calls")

    async def wait_answered(self, count: int, *, timeout_s: float = 60.0) -> None:
        """Return once `count` calls got through; AssertionError after `timeout_s`."""
        await wait_until(lambda: self.answered >= count, timeout_s=timeout_s, what="answers")

    def __call__(self, request: dict[str, Any]) -> str:
        held = self._hold_only is None or self._hold_only(request)
        with self._cond:
            self._arrived += 1
            if held:
                self._waiting += 1
                passed = self._cond.wait_for(lambda: self._open or self._tickets > 0, HOLD_LIMIT_S)
                self._waiting -= 1
                if not passed:
                    raise TimeoutError("the LLM gate was never released")
                if not self._open:
                    self._tickets -= 1
        answer = self.responder(request)
        with self._cond:
            self._answered += 1
        return answer
