"""The `worker` process `serve` starts beside itself (MEMORY_WORKER_PROCESS=true).

One command still starts everything: the API's lifespan starts `python -m service worker
--with-parent` once its database is up and migrated, and stops it (SIGTERM, then SIGKILL
after STOP_WAIT_S) before it closes the database, so SIGTERM or Ctrl-C on `serve` stops both.
The child gets its own session, so a Ctrl-C in the terminal reaches `serve` only, which then
stops the child itself.

No orphan: the child's standard input is one end of a socket pair whose other end only this
process holds. When `serve` dies, however it dies (SIGKILL included), the kernel closes that
end, the child reads end-of-file and stops. The child also writes one line on that socket when
its workers run, which is what `/readyz` reports as `workers: up`.

A child that exits while `serve` runs is started again after a pause that doubles from
supervision.FIRST_PAUSE_S up to MAX_PAUSE_S (a child failing at once does not spin the
cores); `/readyz` says so meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator

from service.config import Settings
from service.jobs import supervision

log = logging.getLogger(__name__)

__all__ = ["READY_LINE", "WorkerProcess", "supervised"]

READY_LINE = b"workers running\n"
"""What the child writes on its standard input socket once its job workers run."""

STOP_WAIT_S = 10.0
"""How long `serve` waits for the child to finish its running jobs after SIGTERM (seconds;
procrastinate lets a running job end) before SIGKILL; within the 20 s the systemd unit
(docs/howto/deploy/memory-service.service, TimeoutStopSec) and Docker's 10 s grace leave.
Jobs killed then run again (procrastinate's stalled-job recovery)."""


class WorkerProcess:
    """The child `worker` process and what `/readyz` says about it.

    Attributes:
        state: "starting", "up (pid N)", or "down: …, restarting in N s".
        ever_up: the child's workers ran at least once since `serve` started.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.state = "starting"
        self.ever_up = False
        self.process: subprocess.Popen[bytes] | None = None
        self._stopping = False

    def stopping(self) -> bool:
        """True once `stop` was called (a call, so type checkers do not narrow it)."""
        return self._stopping

    @property
    def up(self) -> bool:
        """True while the child runs and has said its workers run."""
        return self.state.startswith("up")

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair()
        env = os.environ | self.settings.environment()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "service", "worker", "--with-parent"],
                stdin=theirs.fileno(),
                env=env,
                start_new_session=True,
            )
        finally:
            theirs.close()  # the child holds its own copy; ours alone stays here
        ours.setblocking(False)
        return ours

    async def run(self) -> None:
        """Start the child and keep it running until `stop`."""
        loop = asyncio.get_running_loop()
        pause = supervision.FIRST_PAUSE_S
        while not self.stopping():
            self.state = "starting"
            link = self._start()
            assert self.process is not None
            try:
                line = await loop.sock_recv(link, len(READY_LINE))
                if line and self.process.poll() is None:
                    self.state, self.ever_up = f"up (pid {self.process.pid})", True
                    pause = supervision.FIRST_PAUSE_S
                    await loop.sock_recv(link, 1)  # end-of-file: the child is gone
                code = await asyncio.to_thread(self.process.wait)
            finally:
                link.close()
            if self.stopping():  # stop() ran while this waited
                return
            self.state = f"down: exited with code {code}, restarting in {pause:.0f} s"
            log.warning("the worker process %s", self.state)
            await asyncio.sleep(pause)
            pause = min(supervision.MAX_PAUSE_S, pause * 2)

    async def stop(self) -> None:
        """SIGTERM the child, wait up to STOP_WAIT_S, then SIGKILL; reap it."""
        self._stopping = True
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            log.warning("the worker process did not stop in %.0f s: killed", STOP_WAIT_S)
            process.kill()
            await asyncio.to_thread(process.wait)
        self.state = "stopped"


@contextlib.asynccontextmanager
async def supervised(settings: Settings, *, enabled: bool) -> AsyncIterator[WorkerProcess | None]:
    """A `WorkerProcess` running for the block (None when not `enabled`)."""
    if not enabled:
        yield None
        return
    child = WorkerProcess(settings)
    task = asyncio.create_task(child.run(), name="worker-process")
    try:
        yield child
    finally:
        await child.stop()
        await supervision.cancel(task)
