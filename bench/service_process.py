"""Run the memory service as a subprocess, talk to its HTTP API, and watch the filter's calls.

- `ServiceProcess` starts `python -m service serve` on a state directory (the service then runs
  its own embedded PostgreSQL there), waits for `GET /readyz` to answer 200 within a deadline,
  and stops it with SIGTERM (graceful) or SIGKILL (to test durability).
- `ServiceClient` reads `GET /v1/status` and `GET /v1/users/{id}/memories`
  (`docs/reference/http-api.md`).
- `TurnObserver` records, without changing them, the answers the filter receives to its
  `POST /v1/turns` calls, so the replay knows how many turns the service accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

__all__ = ["ServiceClient", "ServiceProcess", "ServiceStartError", "TurnObserver", "free_port"]

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Environment variables of the service that must not leak from the caller's shell.
_SCRUBBED_PREFIXES = ("MEMORY_", "LLM_")
_SCRUBBED_NAMES = ("DATABASE_URL",)


class ServiceStartError(RuntimeError):
    """The memory service did not become ready."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServiceProcess:
    """The memory service as a child process bound to 127.0.0.1.

    Args:
        state_dir: `MEMORY_STATE_DIR` (database files, generated key); kept across restarts.
        port: `MEMORY_PORT`.
        api_key: `MEMORY_API_KEY`.
        llm_base_url: `LLM_BASE_URL` (OpenAI-compatible, ending in `/v1`).
        llm_model: `LLM_MODEL`.
        log_path: stdout and stderr of every start are appended here.
        env: further settings of the service (e.g. `{"MEMORY_BATCH_QUIET_S": "10"}`).
        command: `serve` (HTTP API) or `worker` (job workers only, no HTTP: `wait_ready`
            does not apply).
    """

    def __init__(
        self,
        *,
        state_dir: Path,
        port: int,
        api_key: str,
        llm_base_url: str,
        llm_model: str,
        log_path: Path,
        env: dict[str, str] | None = None,
        command: str = "serve",
    ) -> None:
        self.command = command
        self.state_dir = state_dir
        self.port = port
        self.api_key = api_key
        self.llm_base_url = llm_base_url
        self.llm_model = llm_model
        self.log_path = log_path
        self.env = dict(env or {})
        self._process: subprocess.Popen[bytes] | None = None
        self.starts = 0  #: how many times the process was started

    @property
    def url(self) -> str:
        """Base URL of the service, e.g. `http://127.0.0.1:41234`."""
        return f"http://127.0.0.1:{self.port}"

    def _environment(self) -> dict[str, str]:
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(_SCRUBBED_PREFIXES) and name not in _SCRUBBED_NAMES
        }
        env.update(
            {
                "MEMORY_STATE_DIR": str(self.state_dir),
                "MEMORY_PORT": str(self.port),
                "MEMORY_API_KEY": self.api_key,
                "LLM_BASE_URL": self.llm_base_url,
                "LLM_MODEL": self.llm_model,
                "LLM_API_KEY": "x",
            }
        )
        env.update(self.env)
        return env

    def start(self) -> None:
        """Start `python -m service <command>` (returns at once; see `wait_ready`)."""
        if self.running:
            raise RuntimeError("the service is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            stamp = time.strftime("%H:%M:%S")
            log.write(f"\n--- start {self.starts + 1} at {stamp} ---\n".encode())
            log.flush()
            # A new session: a Ctrl-C in the terminal reaches only the replay, which then
            # stops the service itself.
            self._process = subprocess.Popen(
                [sys.executable, "-m", "service", self.command],
                cwd=REPO_ROOT,
                env=self._environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    @property
    def pid(self) -> int:
        """Process id of the running child."""
        if self._process is None:
            raise RuntimeError("the service is not running")
        return self._process.pid

    @property
    def running(self) -> bool:
        """True while the child process has not exited."""
        return self._process is not None and self._process.poll() is None

    def wait_ready(self, timeout_s: float) -> float:
        """Poll `GET /readyz` until it answers 200.

        Returns:
            seconds waited.

        Raises:
            ServiceStartError: when the process exits or `timeout_s` passes first; the message
                ends with the tail of the service log.
        """
        started = time.monotonic()
        deadline = started + timeout_s
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                if self._process is not None and self._process.poll() is not None:
                    raise ServiceStartError(
                        f"the service exited with code {self._process.returncode} before it was "
                        f"ready\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/readyz").status_code == 200:
                        return time.monotonic() - started
                if time.monotonic() >= deadline:
                    raise ServiceStartError(
                        f"the service was not ready after {timeout_s:.0f} s\n{self.log_tail()}"
                    )
                time.sleep(0.25)

    def kill(self) -> None:
        """SIGKILL the service process (no shutdown code runs) and reap it."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        self._process = None

    def terminate(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM, wait up to `timeout_s`, then SIGKILL; returns the exit code (None if absent)."""
        if self._process is None:
            return None
        process, self._process = self._process, None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def stop_leftover_postgres(self, timeout_s: float = 30.0) -> list[int]:
        """Stop PostgreSQL servers whose data directory is inside `state_dir`.

        The embedded PostgreSQL outlives a SIGKILLed service (the restarted service reuses it)
        and is then not stopped by the last service either, because its handle list still names
        the killed process. Each server is found through its `postmaster.pid` file and checked
        by its command line before it is sent SIGINT (PostgreSQL's fast shutdown).

        Returns:
            the pids that were signalled.
        """
        stopped: list[int] = []
        for pid_file in self.state_dir.rglob("postmaster.pid"):
            try:
                pid = int(pid_file.read_text().splitlines()[0])
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, ValueError, IndexError):
                continue
            if "postgres" not in cmdline or str(pid_file.parent) not in cmdline:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
                stopped.append(pid)
            deadline = time.monotonic() + timeout_s
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        return stopped

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the service log."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no service log)"
        return "\n".join(text.splitlines()[-lines:])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of someone else still answers signal 0; /proc tells it apart.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


class ServiceClient:
    """Read-only calls to the service's `/v1` API with the bearer key."""

    def __init__(self, url: str, api_key: str, *, timeout_s: float = 30.0) -> None:
        self._client = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout_s,
            trust_env=False,
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def status(self) -> dict[str, Any]:
        """`GET /v1/status`: turns_queued, turns_done, turns_failed, memories_active, ..."""
        response = await self._client.get("/v1/status")
        response.raise_for_status()
        return dict(response.json())

    async def memories(
        self, user_id: str, *, page_size: int = 200
    ) -> tuple[int, list[dict[str, Any]]]:
        """Every memory of a user, paging `GET /v1/users/{id}/memories`.

        Returns:
            (the `total` the service reports, the items read).
        """
        items: list[dict[str, Any]] = []
        total = 0
        while True:
            response = await self._client.get(
                f"/v1/users/{user_id}/memories", params={"limit": page_size, "offset": len(items)}
            )
            response.raise_for_status()
            page = response.json()
            total = int(page.get("total", 0))
            batch = list(page.get("items") or [])
            items.extend(batch)
            if not batch or len(items) >= total:
                return total, items

    async def wait_drained(
        self,
        *,
        accepted: Callable[[], int],
        baseline_finished: int,
        timeout_s: float,
        progress: Callable[[str], None],
        progress_every_s: float = 5.0,
    ) -> tuple[bool, dict[str, Any]]:
        """Poll `GET /v1/status` until extraction has drained or `timeout_s` passes.

        Drained means `turns_queued == 0` and, when the observer saw accepted turns, that
        `turns_done + turns_failed` grew by at least their number since `baseline_finished`.

        Returns:
            (drained, the last status).
        """
        started = time.monotonic()
        last_report = -progress_every_s
        while True:
            status = await self.status()
            finished = int(status.get("turns_done", 0)) + int(status.get("turns_failed", 0))
            drained = int(status.get("turns_queued", 0)) == 0 and (
                finished - baseline_finished >= accepted()
            )
            elapsed = time.monotonic() - started
            if drained or elapsed >= timeout_s or elapsed - last_report >= progress_every_s:
                progress(
                    f"extraction: queued={status.get('turns_queued')} "
                    f"done={status.get('turns_done')} failed={status.get('turns_failed')} "
                    f"memories={status.get('memories_active')} ({elapsed:.0f} s)"
                )
                last_report = elapsed
            if drained:
                return True, status
            if elapsed >= timeout_s:
                return False, status
            await asyncio.sleep(0.5)


class TurnObserver:
    """Counts the service's answers to `POST /v1/turns` as httpx delivers them.

    While installed, `httpx.AsyncClient.send` is wrapped: the request and the response pass
    through unchanged; for `POST …/v1/turns` the answer's `status` field (`queued`,
    `duplicate`, `skipped`) or the HTTP error is counted, and calls in flight are tracked so a
    restart can wait until none is pending.
    """

    def __init__(self) -> None:
        self.answers: Counter[str] = Counter()  #: answer → count ("queued", "http 503", ...)
        self._in_flight = 0
        self._lock = threading.Lock()
        self._original: Any = None

    @property
    def accepted(self) -> int:
        """Turns the service answered `queued` (stored as a job)."""
        with self._lock:
            return self.answers["queued"]

    @property
    def in_flight(self) -> int:
        """`POST /v1/turns` calls sent but not answered yet."""
        with self._lock:
            return self._in_flight

    def install(self) -> None:
        """Wrap `httpx.AsyncClient.send` (idempotent)."""
        if self._original is not None:
            return
        original = httpx.AsyncClient.send
        observer = self

        async def send(
            client: httpx.AsyncClient, request: httpx.Request, *args: Any, **kwargs: Any
        ) -> httpx.Response:
            if request.method != "POST" or not request.url.path.endswith("/v1/turns"):
                return await original(client, request, *args, **kwargs)
            observer._count(+1, None)
            try:
                response = await original(client, request, *args, **kwargs)
            except BaseException as exc:
                observer._count(-1, f"error {type(exc).__name__}")
                raise
            observer._count(-1, _turn_answer(response))
            return response

        self._original = original
        httpx.AsyncClient.send = send  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        """Restore `httpx.AsyncClient.send`."""
        if self._original is not None:
            httpx.AsyncClient.send = self._original  # type: ignore[method-assign]
            self._original = None

    def _count(self, delta: int, answer: str | None) -> None:
        with self._lock:
            self._in_flight += delta
            if answer is not None:
                self.answers[answer] += 1

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no `POST /v1/turns` is in flight; False when `timeout_s` passed first."""
        deadline = time.monotonic() + timeout_s
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return self.in_flight == 0


def _turn_answer(response: httpx.Response) -> str:
    if not 200 <= response.status_code < 300:
        return f"http {response.status_code}"
    try:
        return str(response.json().get("status", "unknown"))
    except (httpx.ResponseNotRead, ValueError, AttributeError):
        return "unreadable"
