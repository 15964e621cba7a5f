"""`python -m service worker`: job workers, periodic jobs, re-embedding and index loops, no HTTP.

Run one or more beside API replicas started with MEMORY_RUN_WORKERS=false (docs/scaling.md),
or let `serve` start one (MEMORY_WORKER_PROCESS=true, `service/jobs/worker_process.py`).

The process schedules itself MEMORY_WORKER_NICE lower at start, before it starts any thread
(Linux keeps the nice value per thread, and new threads inherit their creator's), and on
the embedded PostgreSQL its connections' server processes too
(`service/storage/backend_priority.py`): on busy cores the API's inlets run first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket

import typer

from service import bootstrap, observability
from service.cli.failures import fail
from service.config import Settings
from service.errors import MemoryServiceError
from service.jobs import background
from service.jobs.worker_process import READY_LINE

log = logging.getLogger(__name__)


def worker(
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Tracebacks and debug logs."),
    with_parent: bool = typer.Option(
        False,
        "--with-parent",
        hidden=True,
        help="Started by `serve`: standard input is a socket to it; stop at its end-of-file.",
    ),
) -> None:
    """Run the job workers only (no HTTP) until SIGTERM or Ctrl-C."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        logging.getLogger("pgserver").setLevel(logging.WARNING)
    try:
        settings = Settings()
        lower_own_priority(settings.worker_nice)
        asyncio.run(_run(settings, with_parent=with_parent))
    except MemoryServiceError as exc:
        fail(exc, verbose)


def lower_own_priority(by: int) -> None:
    """Raise this process's nice value by `by` (0: unchanged; where the OS refuses, the
    worker runs at its priority and says so in the log).
    """
    if by <= 0:
        return
    try:
        os.nice(by)
    except (AttributeError, OSError) as exc:
        log.warning("the worker keeps its scheduling priority: %s", exc)


async def _run(settings: Settings, *, with_parent: bool) -> None:
    observability.configure_logging(settings.log_format)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = socket.socket(fileno=os.dup(0)) if with_parent else None
    watching = asyncio.create_task(_parent_gone(parent, stop)) if parent else None
    try:
        async with (
            bootstrap.open_service(settings, background=True) as runtime,
            background.running(runtime, workers=True),
        ):
            log.info(
                "worker ready: %s job workers%s",
                settings.worker_concurrency,
                "" if runtime.llm.configured else " (no LLM configured: extraction jobs wait)",
            )
            if parent is not None:
                with contextlib.suppress(OSError):  # a parent gone already: stop is set
                    await loop.sock_sendall(parent, READY_LINE)
            await stop.wait()
    finally:
        if watching is not None:
            watching.cancel()
        if parent is not None:
            parent.close()
    log.info("worker stopped")


async def _parent_gone(parent: socket.socket, stop: asyncio.Event) -> None:
    """Set `stop` when `serve`, which holds the other end of `parent`, closes it or dies."""
    parent.setblocking(False)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError):
        while await loop.sock_recv(parent, 64):
            pass
    log.info("the serve process that started this worker is gone: stopping")
    stop.set()
