"""The memory service running in a background thread, reachable over real HTTP."""

from __future__ import annotations

import secrets
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from service.api.app import create_app
from service.config import Settings
from service.embeddings.encoder import Encoder
from testkit.waiting import wait_until


@dataclass
class LiveService:
    """A started service: base URL, key, and an HTTP client with the key set."""

    base_url: str
    api_key: str
    server: uvicorn.Server
    thread: threading.Thread
    app: Any
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(
            base_url=self.base_url, timeout=30, headers={"Authorization": f"Bearer {self.api_key}"}
        )

    @classmethod
    def start(
        cls,
        *,
        database_url: str,
        encoder: Encoder,
        state_dir: Path,
        env: dict[str, str] | None = None,
        timeout_s: float = 60,
        until: str = "/readyz",
    ) -> LiveService:
        """Start the service and return once `until` answers 200 ("/readyz": warm and
        ready; "/healthz": the process serves, the read path may still be warming up).
        """
        key = secrets.token_urlsafe(16)
        # A busy 2-core test machine must not turn the inlet deadline into flaky tests;
        # tests of the deadline set it themselves. Extraction runs per turn unless a test
        # sets the batch thresholds (tests of batching do).
        values: dict[str, Any] = {
            "DATABASE_URL": database_url,
            "MEMORY_API_KEY": key,
            "MEMORY_STATE_DIR": str(state_dir),
            "MEMORY_CONTEXT_DEADLINE_S": "20",
            "MEMORY_BATCH_MESSAGES": "1",
            # the job workers in this process, on the test's encoder and stubs (a test of the
            # worker process starts `serve` itself: tests/integration/test_worker_process.py)
            "MEMORY_WORKER_PROCESS": "false",
        }
        values.update(env or {})
        settings = Settings(**values)
        app = create_app(settings, encoder=encoder)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        live = cls(f"http://127.0.0.1:{port}", key, server, thread, app)

        def ready() -> bool:
            if not thread.is_alive():
                raise RuntimeError("the service thread exited during startup")
            return httpx.get(f"{live.base_url}{until}", timeout=2).status_code == 200

        try:
            wait_until(
                ready,
                what=f"the service's {until}",
                timeout_s=timeout_s,
                ignoring=(httpx.HTTPError,),
            )
        except TimeoutError:
            live.stop()
            raise
        return live

    def wait_for_extraction(self, timeout_s: float = 60) -> dict[str, Any]:
        """Wait until no turn is queued; returns the final /v1/status."""

        def drained() -> dict[str, Any] | None:
            status: dict[str, Any] = self.client.get("/v1/status").json()
            return status if status["turns_queued"] == 0 else None

        found = wait_until(drained, what="no turn queued", timeout_s=timeout_s)
        assert found is not None
        return found

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)
