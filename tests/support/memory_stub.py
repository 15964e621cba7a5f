"""A tiny stand-in for the memory service: a real HTTP server on 127.0.0.1 in a thread."""

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordedRequest:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]
    raw_body: bytes
    #: the decoded JSON body, or None when it was not JSON
    body: Any


@dataclass
class StubReply:
    """What the stub answers: a status, a JSON value or raw bytes, after an optional delay."""

    status: int = 200
    json: Any = None
    raw: bytes | None = None
    delay_s: float = 0.0
    #: the version in the X-Memory-Service header, as the real service sends it; None: a
    #: server that is not the memory service (no header)
    service_version: str | None = "0.1.0"


Responder = Callable[[RecordedRequest], StubReply]


def default_responder(request: RecordedRequest) -> StubReply:
    """Answer as the service would: a fixed block for context, `queued` for turns."""
    if request.path == "/v1/context":
        return StubReply(
            json={
                "block": "<userMemories>Alice likes tea.</userMemories>",
                "memories": [
                    {
                        "id": "m-1",
                        "bank": "personal",
                        "content": "Alice likes tea.",
                        "similarity": 0.81,
                        "score": 0.72,
                        "created_at": "2023-05-08T13:56:00Z",
                    },
                    {
                        "id": "m-2",
                        "bank": "personal",
                        "content": "Alice has a cat.",
                        "similarity": 0.78,
                        "score": 0.70,
                        "created_at": "2023-05-08T13:56:00Z",
                    },
                ],
                "profile": None,
                "status": "2 memories recalled",
            }
        )
    if request.path == "/v1/turns":
        return StubReply(status=202, json={"status": "queued", "detail": "The turn is queued."})
    return StubReply(status=404, json={"detail": "Not found."})


@dataclass
class MemoryServiceStub:
    """Serve `responder` on a free loopback port while the `with` block runs."""

    responder: Responder = default_responder
    requests: list[RecordedRequest] = field(default_factory=list)
    max_in_flight: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "MemoryServiceStub":
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    decoded = json.loads(raw)
                except ValueError:
                    decoded = None
                request = RecordedRequest(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    raw_body=raw,
                    body=decoded,
                )
                with stub._lock:
                    stub.requests.append(request)
                    stub._in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub._in_flight)
                try:
                    reply = stub.responder(request)
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                    payload = (
                        reply.raw if reply.raw is not None else json.dumps(reply.json).encode()
                    )
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    if reply.service_version is not None:
                        self.send_header("X-Memory-Service", reply.service_version)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                finally:
                    with stub._lock:
                        stub._in_flight -= 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class QuietServer(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # the client gave up (timeout tests); nothing to report

        self._server = QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]


def closed_port_url() -> str:
    """A loopback URL on which nothing listens (the port was just released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


TEST_TIMEOUT_S = 30.0
"""The inlet valve of tests that check what the filter sends, not how fast it gives up: a busy
machine must not turn a slow stub into a request that never came (timing contracts have
their own tests, measured on the event loop's clock)."""
