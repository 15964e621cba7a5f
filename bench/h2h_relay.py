"""The model endpoint Open WebUI talks to in `bench.h2h_openwebui`: a recording relay.

Open WebUI gets `OPENAI_API_BASE_URL` and `RAG_OPENAI_API_BASE_URL` = this relay's `/v1`.

- `POST /v1/chat/completions` is forwarded to the real model (llama.cpp's server). Each
  request is recorded (its body, when it arrived, when the model's first content token came
  back, when it ended): that is how the benchmark sees what Open WebUI sent to the model
  (the injected memory block) and the time to the first token. A non-streaming request is
  asked of the model as a stream and handed back as one `chat.completion`, so the first
  token's time is known for it too; the content is the same.
- `POST /v1/embeddings` answers with the project's encoder (all-MiniLM-L6-v2, which is also
  Open WebUI's default `RAG_EMBEDDING_MODEL`), so Open WebUI's memory search runs on the
  vectors it would compute itself; llama.cpp's server serves no embeddings.
- `GET /v1/models` is forwarded.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

__all__ = ["ModelRelay", "RelayedRequest"]


@dataclass
class RelayedRequest:
    """One chat-completion request Open WebUI sent; times are `time.time()` seconds."""

    body: dict[str, Any]
    received: float
    first_token: float | None = None  #: first non-empty content delta from the model
    finished: float | None = None
    reply: str = ""
    status: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class ModelRelay:
    """The relay, served from a daemon thread on 127.0.0.1.

    Args:
        upstream: the model's base URL, e.g. `http://127.0.0.1:8091/v1`.
        embed: texts → vectors (lists of floats); None answers embeddings with 404.
        timeout_s: seconds one upstream call may take.
        log_path: where each finished chat request is appended as a JSON line (or None).
    """

    def __init__(
        self,
        upstream: str,
        *,
        embed: Callable[[Sequence[str]], list[list[float]]] | None = None,
        timeout_s: float = 900.0,
        log_path: Path | None = None,
    ) -> None:
        self.log_path = log_path
        self.upstream = upstream.rstrip("/")
        self.embed = embed
        self.requests: list[RelayedRequest] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=timeout_s, trust_env=False)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the relay is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self, port: int = 0) -> ModelRelay:
        """Serve on `port` (0 = any free one) in a daemon thread; returns self."""
        server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        server.daemon_threads = True
        server.relay = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._client.close()

    def mark(self) -> int:
        with self._lock:
            return len(self.requests)

    def since(self, mark: int) -> list[RelayedRequest]:
        with self._lock:
            return list(self.requests[mark:])

    def _log(self, record: RelayedRequest) -> None:
        if self.log_path is None:
            return
        line = {
            "received": record.received,
            "first_token": record.first_token,
            "finished": record.finished,
            "status": record.status,
            "body": record.body,
            "reply": record.reply,
        }
        with self._lock, self.log_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")

    # -- the routes --------------------------------------------------------------------------

    def models(self) -> tuple[int, bytes]:
        response = self._client.get(f"{self.upstream}/models")
        return response.status_code, response.content

    def embeddings(self, body: dict[str, Any]) -> tuple[int, bytes]:
        if self.embed is None:
            return 404, b'{"error": {"message": "no embeddings here"}}'
        raw = body.get("input")
        texts = [str(t) for t in (raw if isinstance(raw, list) else [raw])]
        vectors = self.embed(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": vector}
            for i, vector in enumerate(vectors)
        ]
        answer = {"object": "list", "data": data, "model": str(body.get("model", "")), "usage": {}}
        return 200, json.dumps(answer).encode()

    def chat(
        self, body: dict[str, Any], write: Callable[[bytes], None] | None
    ) -> tuple[int, bytes]:
        """Relay one chat completion. With `write` (a streaming request) the model's SSE
        bytes are written through as they come and (status, b"") is returned; without it the
        answer is assembled from the stream and returned whole.
        """
        record = RelayedRequest(body=body, received=time.time())
        with self._lock:
            self.requests.append(record)
        upstream_body = {**body, "stream": True}
        upstream_body.pop("stream_options", None)
        parts: list[str] = []
        finish_reason = "stop"
        try:
            with self._client.stream(
                "POST", f"{self.upstream}/chat/completions", json=upstream_body
            ) as response:
                record.status = response.status_code
                if response.status_code >= 400:
                    data = response.read()
                    record.finished = time.time()
                    return response.status_code, data
                for line in response.iter_lines():
                    if write is not None:
                        write((line + "\n").encode())
                    if not line.startswith("data:"):
                        continue
                    payload = line.removeprefix("data:").strip()
                    if not payload or payload == "[DONE]":
                        continue
                    for choice in json.loads(payload).get("choices") or []:
                        content = (choice.get("delta") or {}).get("content")
                        if isinstance(content, str) and content:
                            if record.first_token is None:
                                record.first_token = time.time()
                            parts.append(content)
                        finish_reason = choice.get("finish_reason") or finish_reason
        except httpx.HTTPError as exc:
            record.finished = time.time()
            record.status = 502
            return 502, json.dumps({"error": {"message": f"model unreachable: {exc!r}"}}).encode()
        record.finished = time.time()
        record.reply = "".join(parts)
        self._log(record)
        if write is not None:
            return record.status, b""
        answer = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(record.received),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": record.reply},
                    "finish_reason": finish_reason,
                }
            ],
        }
        return 200, json.dumps(answer).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the relay's records are the log."""

    @property
    def relay(self) -> ModelRelay:
        return self.server.relay  # type: ignore[attr-defined,no-any-return]

    def _answer(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except ConnectionError:
            pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._answer(*self.relay.models())
        else:
            self._answer(404, b'{"error": {"message": "no such route"}}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._answer(400, b'{"error": {"message": "the body is not JSON"}}')
            return
        path = self.path.rstrip("/")
        if path.endswith("/embeddings"):
            self._answer(*self.relay.embeddings(body))
        elif path.endswith("/chat/completions"):
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

                def write(chunk: bytes) -> None:
                    try:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    except ConnectionError:
                        pass

                self.relay.chat(body, write)
            else:
                self._answer(*self.relay.chat(body, None))
        else:
            self._answer(404, b'{"error": {"message": "no such route"}}')
