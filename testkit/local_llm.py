"""A real llama.cpp server with a registry model, and a recording proxy in front of it.

`LocalLLMServer` assembles a model of `service.cli.local_models` (verified by SHA-256) and
runs llama-cpp-python's OpenAI-compatible server on a free port of 127.0.0.1 until stopped.
`forwarding(server)` is an `LLMStub` responder that sends each request on to that server and
returns its answer, so a test sees every request and answer (and may alter one: `tamper`)
while the model itself is real.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from service.cli import local_models
from testkit.llm_stub import StubReply

#: Seconds a started server may take to load its model and answer `/v1/models`
#: (the 1.1 GB model maps in a few seconds; a busy 2-core machine is much slower).
START_TIMEOUT_S = 300.0
#: Seconds one proxied completion may take (the 1.5B model writes 2-10 tokens/s here).
COMPLETION_TIMEOUT_S = 900.0


def models_dir() -> Path:
    """Where tests keep assembled models: MEMORY_TESTS_MODELS_DIR, else the user's cache."""
    configured = os.environ.get("MEMORY_TESTS_MODELS_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "memory-banks-models"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LocalLLMServer:
    """llama.cpp's server for one registry model on 127.0.0.1 (a subprocess)."""

    key: str
    threads: int = 1
    log_path: Path | None = None
    port: int = field(default_factory=_free_port)
    _process: subprocess.Popen[bytes] | None = None

    @property
    def entry(self) -> local_models.LocalModel:
        return local_models.model(self.key)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def alias(self) -> str:
        return self.entry.alias

    def start(self) -> LocalLLMServer:
        """Assemble the model if needed, start the server, wait until it lists the model.

        Raises:
            local_models.LocalModelError: model or server missing, or the server never came up.
        """
        path = local_models.assemble(self.entry, models_dir())
        if not local_models.server_available():
            raise local_models.LocalModelError("llama-cpp-python[server] is not installed")
        command = local_models.server_command(
            self.entry, path, port=self.port, threads=self.threads
        )
        log = (self.log_path or Path(os.devnull)).open("ab")
        self._process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=local_models.server_environment()
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise local_models.LocalModelError(
                    f"the llama.cpp server exited with {self._process.returncode} on start"
                )
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise local_models.LocalModelError(
            f"the llama.cpp server did not answer in {START_TIMEOUT_S} s"
        )

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass
class Exchange:
    """One proxied call: the request body, the model's answer and what was returned."""

    request: dict[str, Any]
    answer: str
    returned: str
    seconds: float
    usage: dict[str, Any]


Tamper = Callable[[dict[str, Any], str], str]


class Forwarder:
    """An `LLMStub` responder that forwards to a real server (one call at a time).

    llama.cpp serves one request at a time anyway; the lock keeps the recorded order the
    order of answers. `tamper(request, answer)` may return another text than the model's.
    """

    def __init__(
        self,
        server: LocalLLMServer,
        tamper: Tamper | None = None,
        local: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> None:
        self.server = server
        self.tamper = tamper
        #: answers some requests without the model (None: ask the model), e.g. to let a test
        #: reach the call kind it is about quickly
        self.local = local
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str | StubReply:
        if self.local is not None and (shortcut := self.local(body)) is not None:
            return shortcut
        request = {**body, "model": self.server.alias}
        with self._lock:
            started = time.monotonic()
            response = httpx.post(
                f"{self.server.base_url}/chat/completions",
                json=request,
                timeout=COMPLETION_TIMEOUT_S,
            )
            seconds = time.monotonic() - started
            if response.status_code >= 400:
                return StubReply(status=response.status_code, text=response.text[:500])
            data = response.json()
            answer = str(data["choices"][0]["message"].get("content") or "")
            returned = self.tamper(body, answer) if self.tamper else answer
            self.exchanges.append(
                Exchange(body, answer, returned, seconds, dict(data.get("usage") or {}))
            )
            return returned
