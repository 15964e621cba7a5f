"""`python -m service worker`: job workers, periodic jobs, re-embedding and index loops, no HTTP.

Run one or more beside API replicas started with MEMORY_RUN_WORKERS=false (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
import logging
import signal

import typer

from service import bootstrap, observability
from service.cli.failures import fail
from service.config import Settings
from service.errors import MemoryServiceError
from service.jobs import background

log = logging.getLogger(__name__)


def worker(
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Tracebacks and debug logs."),
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
        asyncio.run(_run(settings))
    except MemoryServiceError as exc:
        fail(exc, verbose)


async def _run(settings: Settings) -> None:
    observability.configure_logging(settings.log_format)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with (
        bootstrap.open_service(settings) as runtime,
        background.running(runtime, workers=True),
    ):
        log.info(
            "worker ready: %s job workers%s",
            settings.worker_concurrency,
            "" if runtime.llm.configured else " (no LLM configured: extraction jobs wait)",
        )
        await stop.wait()
    log.info("worker stopped")
