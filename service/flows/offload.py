"""CPU-heavy steps of bulk work, off the event loop that serves inlets (issue 26).

Parsing an LLM answer, guarding and deduplicating an import, planning a consolidation: each
runs on a small pool of worker threads, at most one step per owner at a time, so one user's
bulk work never holds the loop and never takes every worker from another user. The inlet's
query embedding has a lane of its own in the encoder (`Encoder.encode`), so an inlet never
queues behind any of this.

Pure-Python steps still take the GIL while they run; CPython hands it back to the loop's
thread every `sys.getswitchinterval()` (5 ms), so the loop's longest stall while a step runs
is milliseconds, not the step's seconds.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["WORKERS", "in_worker", "on_worker_thread"]

P = ParamSpec("P")
T = TypeVar("T")

WORKERS = 2
"""Threads of the pool: the machine's two cores; more would only queue on the GIL."""

_pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="bulk-cpu")
_owner_slots: dict[str, asyncio.Semaphore] = {}
_owner_users: dict[str, int] = {}


def on_worker_thread() -> bool:
    """True on one of the pool's threads (what tests check a heavy step ran on)."""
    return threading.current_thread().name.startswith("bulk-cpu")


async def in_worker(owner: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run `fn(*args, **kwargs)` on the pool, after the owner's earlier steps finished.

    Args:
        owner: whose work this is (a user or folder id): one step of an owner runs at a
            time, so a second owner always finds a free thread beside the first.

    Returns:
        What `fn` returned; its exception is raised here.
    """
    slot = _owner_slots.setdefault(owner, asyncio.Semaphore(1))
    _owner_users[owner] = _owner_users.get(owner, 0) + 1
    try:
        async with slot:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(_pool, functools.partial(fn, *args, **kwargs))
    finally:
        _owner_users[owner] -= 1
        if not _owner_users[owner]:  # nobody waits: the owner's slot goes
            del _owner_users[owner]
            _owner_slots.pop(owner, None)
