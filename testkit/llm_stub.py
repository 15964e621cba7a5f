"""A local OpenAI-compatible chat endpoint that answers from a Python function.

Tests and the LoCoMo replay point the memory service's `LLM_BASE_URL` at this server instead of
a real model. It serves:

- `GET  /v1/models` → `{"object": "list", "data": [{"id": "stub-model", ...}]}`
- `POST /v1/chat/completions` → the text returned by the responder, as a `chat.completion`
  object (with `usage`), or, when the request has `"stream": true`, as server-sent events:
  `chat.completion.chunk` objects (role, content deltas, a final chunk with
  `finish_reason: "stop"`, a usage chunk when `stream_options.include_usage` is set) followed by
  `data: [DONE]`.

The responder is any `Callable[[dict], str]` that receives the decoded request body; it may
also return a `StubReply` to answer late (`delay_s`, to test client timeouts), with an HTTP
error (`status`, e.g. 429 or 503, to test retries) or with tool calls (`tool_calls`: the
model calls functions of the request's `tools`, `finish_reason: "tool_calls"`). Fields the
stub does not use (`tools`, `response_format`, `temperature`, ...) are accepted and ignored.
Every POST body is kept in `LLMStub.requests` (thread-safe) and, when a path is given, appended
to a JSON-lines file.

Token counts in `usage` are whitespace-separated words, not model tokens.

Run on its own: `python -m testkit.llm_stub --port 8089` (Ctrl-C stops it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_REPLY",
    "MODEL_ID",
    "LLMStub",
    "Responder",
    "StubReply",
    "default_responder",
]

MODEL_ID = "stub-model"
DEFAULT_REPLY = "STUB-REPLY ok"


@dataclass(frozen=True)
class StubReply:
    """A reply with a delay or an HTTP error instead of plain text.

    `delay_s` seconds pass before anything is sent (a client with a shorter timeout sees a
    timeout); a `status` other than 200 answers an OpenAI-style error body with that status,
    `text` as its message and `headers` (e.g. `{"Retry-After": "7"}`).
    """

    text: str = ""
    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    #: functions the model calls, each `(name, arguments)`: sent as OpenAI `tool_calls` (ids
    #: `call_0`, `call_1`, …) with `finish_reason: "tool_calls"`
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


#: Turns a decoded chat-completion request body into the reply text (or a `StubReply`).
Responder = Callable[[dict[str, Any]], "str | StubReply"]


def default_responder(_request: dict[str, Any]) -> str:
    """Answer every request with `DEFAULT_REPLY`."""
    return DEFAULT_REPLY


class LLMStub:
    """An OpenAI-compatible server on 127.0.0.1 running in a background thread.

    Use it as a context manager or call `start()` / `stop()`:

        with LLMStub(responder=lambda req: "hello") as stub:
            client_base_url = stub.base_url          # "http://127.0.0.1:<port>/v1"
            ...
            stub.responder = other_function          # swap at any time
            sent = stub.requests[-1]["messages"]     # what the client sent

    Args:
        responder: produces the reply text from the request body; `default_responder` if None.
        port: TCP port; 0 picks a free one (read it back from `port` after `start()`).
        log_path: if set, every request body is also appended to this file as one JSON line.
        stream_chunk_chars: maximum characters per streamed content delta.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        port: int = 0,
        log_path: str | Path | None = None,
        stream_chunk_chars: int = 8,
    ) -> None:
        self._responder: Responder = responder or default_responder
        self._requested_port = port
        self._log_path = Path(log_path) if log_path is not None else None
        self._stream_chunk_chars = max(1, stream_chunk_chars)
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> LLMStub:
        """Bind 127.0.0.1 and serve in a daemon thread; returns self."""
        if self._server is not None:
            return self
        server = _StubServer(("127.0.0.1", self._requested_port), _Handler)
        server.stub = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"llm-stub:{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        server, thread = self._server, self._thread
        self._server, self._thread = None, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> LLMStub:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what tests read and change --------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port (only while running)."""
        if self._server is None:
            raise RuntimeError("the LLM stub is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, e.g. `http://127.0.0.1:40123/v1` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def responder(self) -> Responder:
        """The function that produces reply texts; assign to swap it while running."""
        with self._lock:
            return self._responder

    @responder.setter
    def responder(self, responder: Responder | None) -> None:
        with self._lock:
            self._responder = responder or default_responder

    def set_responder(self, responder: Responder | None) -> None:
        """Swap the responder (None restores `default_responder`)."""
        self.responder = responder

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of every POST body received so far, oldest first.

        A body that is not a JSON object is kept as `{"_raw": "<text>"}`.
        """
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Forget the request log (the JSON-lines file is left as it is)."""
        with self._lock:
            self._requests.clear()

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self._requests.append(body)
            if self._log_path is not None:
                with self._log_path.open("a", encoding="utf-8") as log:
                    log.write(json.dumps(body, ensure_ascii=False) + "\n")


class _StubServer(ThreadingHTTPServer):
    daemon_threads = True
    stub: LLMStub

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer (e.g. a killed service) is not an error here."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _count_words(value: Any) -> int:
    """Whitespace-separated words in a message content (string or list of parts)."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_count_words(part.get("text", "")) for part in value if isinstance(part, dict))
    return 0


def _embeddings(texts: Any) -> dict[str, Any]:
    """An OpenAI-style embeddings answer: 8 numbers a text, derived from its hash."""
    items = texts if isinstance(texts, list) else [texts]
    data = []
    for index, text in enumerate(items):
        digest = hashlib.sha256(str(text).encode()).digest()
        data.append(
            {"object": "embedding", "index": index, "embedding": [b / 255 for b in digest[:8]]}
        )
    return {"object": "list", "data": data, "model": "stub-embedding", "usage": {}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "LLMStub/1.0"

    @property
    def stub(self) -> LLMStub:
        return self.server.stub  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet: the request log is the record."""

    # -- routes ----------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "stub"}],
                },
            )
        else:
            self._send_error(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", errors="replace") if length else ""
        try:
            decoded = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            decoded = None
        body: dict[str, Any] = decoded if isinstance(decoded, dict) else {"_raw": raw}
        if self.path.rstrip("/") in ("/v1/embeddings", "/embeddings"):
            # Open WebUI embeds its own memories (e2e): not an LLM call, so not recorded
            self._send_json(200, _embeddings(body.get("input")))
            return
        self.stub._record(body)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_error(404, f"no route for POST {self.path}")
            return
        if decoded is None or "_raw" in body:
            self._send_error(400, "the request body is not a JSON object")
            return
        try:
            reply = self.stub.responder(body)
        except Exception as exc:  # the responder is test code: report, do not crash the server
            self._send_error(500, f"the stub responder failed: {exc!r}")
            return
        if isinstance(reply, StubReply):
            if reply.delay_s > 0:
                time.sleep(reply.delay_s)
            if reply.status != 200:
                message = reply.text or f"stub status {reply.status}"
                self._send_json(
                    reply.status,
                    {"error": {"message": message, "type": "stub_error"}},
                    headers=reply.headers,
                )
                return
            text = reply.text
            calls = [
                {
                    "id": f"call_{index}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for index, (name, arguments) in enumerate(reply.tool_calls)
            ]
        else:
            text = str(reply)
            calls = []
        model = str(body.get("model") or MODEL_ID)
        prompt_tokens = sum(
            _count_words(m.get("content"))
            for m in body.get("messages") or []
            if isinstance(m, dict)
        )
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(text.split()),
            "total_tokens": prompt_tokens + len(text.split()),
        }
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        if body.get("stream") is True:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._send_stream(completion_id, model, text, usage if include_usage else None, calls)
        else:
            self._send_json(
                200,
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": text,
                                **({"tool_calls": calls} if calls else {}),
                            },
                            "logprobs": None,
                            "finish_reason": "tool_calls" if calls else "stop",
                        }
                    ],
                    "usage": usage,
                },
            )

    # -- writers ---------------------------------------------------------------------------

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": "stub_error"}})

    def _send_stream(
        self,
        completion_id: str,
        model: str,
        text: str,
        usage: dict[str, int] | None,
        calls: list[dict[str, Any]] | None = None,
    ) -> None:
        # No Content-Length and no chunked encoding: the end of the body is the closed connection.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        size = self.stub._stream_chunk_chars
        events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""}, None)]
        events += [chunk({"content": text[i : i + size]}, None) for i in range(0, len(text), size)]
        if calls:
            delta = [{"index": i, **call} for i, call in enumerate(calls)]
            events.append(chunk({"tool_calls": delta}, None))
        events.append(chunk({}, "tool_calls" if calls else "stop"))
        if usage is not None:
            events.append(
                {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
        for event in events:
            self.wfile.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted: `python -m testkit.llm_stub --port N [--log FILE]`."""
    parser = argparse.ArgumentParser(description="OpenAI-compatible stand-in LLM server.")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any).")
    parser.add_argument("--log", type=Path, default=None, help="JSON-lines file of request bodies.")
    parser.add_argument("--reply", default=DEFAULT_REPLY, help="Fixed reply text.")
    args = parser.parse_args(argv)
    reply = args.reply
    stub = LLMStub(lambda _request: reply, port=args.port, log_path=args.log).start()
    print(f"LLM stub serving {stub.base_url} (model {MODEL_ID}); Ctrl-C stops it.", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        stub.stop()


if __name__ == "__main__":
    main()
