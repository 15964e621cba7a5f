"""A metering relay between the memory service and the extraction model.

The evaluated service gets `LLM_BASE_URL=http://127.0.0.1:<port>/v1` of this relay; each
request is forwarded unchanged to the configured endpoint (the only host it ever contacts,
`trust_env=False`) with the configured key, and its answer is passed back unchanged. On the
way, per request: its kind (extraction, repair retry, chat summary, other), whether the same
request was seen before (the service's job retried after a failure, `request_fingerprint`),
the outcome (ok, timeout, `http <status>`, connection error), the seconds it took, the
tokens of the answer's `usage` (or the service's estimate when the endpoint reports none), and
for extraction answers whether they decode as the JSON the service asks for
(`service.llm.client`): prose instead of JSON is a parse failure.

Counts are cumulative and can be seeded from a saved state (`MeteringProxy(seed=…)`), so a
resumed evaluation keeps adding to them.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from service.core.extraction import REPAIR_PROMPT
from service.core.tokens import estimate_tokens
from service.errors import ExtractionOutputInvalid
from service.llm.client import decode_json_answer

__all__ = [
    "MeteringProxy",
    "classify_request",
    "extraction_answer_parses",
    "request_fingerprint",
]

#: the relay's counters (all integers) and their meaning
COUNTERS = (
    "requests",  # every POST relayed
    "extraction",  # first tries of extraction prompts
    "repair",  # the service's repair retries after an invalid answer
    "summary",  # rolling chat summary requests
    "other",  # anything else (e.g. profile requests)
    "repeated",  # an extraction asked again (`request_fingerprint`): the job was retried
    "ok",
    "timeouts",
    "http_errors",
    "connection_errors",
    "parse_failures",  # extraction or repair answers that are not the JSON asked for
    "prompt_tokens",
    "completion_tokens",
    "tokens_estimated",  # answers without `usage` (their tokens are estimates)
    "milliseconds",  # summed time of the relayed requests
)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def classify_request(body: dict[str, Any]) -> str:
    """The kind of request by the service's prompts: "repair", "extraction", "summary", "other"."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last = _text(messages[-1].get("content")) if messages else ""
    if last.strip() == REPAIR_PROMPT:
        return "repair"
    if any("<new_user_message>" in _text(m.get("content")) for m in messages):
        return "extraction"
    if "<chat_summary>" in last:
        return "summary"
    return "other"


_BATCH_LINE = re.compile(
    r"^\[u\d+\] [^\n]*\n<new_user_message>.*?</new_user_message>", re.DOTALL | re.M
)
_USER_NAME = re.compile(r"<user_name>.*?</user_name>", re.DOTALL)


def request_fingerprint(kind: str, body: dict[str, Any], raw: bytes) -> str:
    """What makes a request "the same" as an earlier one.

    An extraction (or repair) request is the same when it asks about the same user's same
    messages with the same dates — the memories shown next to them may have changed in between
    (other turns were extracted meanwhile). Other requests must be byte-identical.
    """
    if kind in ("extraction", "repair"):
        prompt = "\n".join(
            _text(m.get("content"))
            for m in body.get("messages") or []
            if isinstance(m, dict) and "<new_user_message>" in _text(m.get("content"))
        )
        key = "\n".join([kind, *_USER_NAME.findall(prompt), *_BATCH_LINE.findall(prompt)])
        if not _BATCH_LINE.search(prompt):  # a one-message prompt has no [u1] line
            key += prompt
        return hashlib.sha256(key.encode()).hexdigest()[:16]
    return hashlib.sha256(raw).hexdigest()[:16]


def extraction_answer_parses(text: str) -> bool:
    """True when an extraction answer decodes to `{"operations": [...]}` as the service reads it."""
    try:
        data = decode_json_answer(text)
    except ExtractionOutputInvalid:
        return False
    return isinstance(data, dict) and isinstance(data.get("operations"), list)


class MeteringProxy:
    """The relay, served from a background thread on 127.0.0.1.

    Args:
        upstream: the endpoint's base URL (e.g. `https://api.example.com/v1`).
        api_key: the endpoint's key, added to each relayed request (the service holds none).
        timeout_s: seconds a relayed call may take; the service's own `LLM_TIMEOUT_S` should
            be longer, so a slow model is seen here as a timeout (answered 504).
        seed: counters of an earlier run to continue from.
    """

    def __init__(
        self,
        upstream: str,
        *,
        api_key: str | None,
        timeout_s: float,
        seed: dict[str, int] | None = None,
        seen: list[str] | None = None,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, trust_env=False)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter(dict.fromkeys(COUNTERS, 0))
        self.counts.update(seed or {})
        self._seen: set[str] = set(seen or ())
        #: first unreadable answers, for the results (at most 5, 300 characters each)
        self.unreadable: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The relay's base URL for `LLM_BASE_URL` (only while running)."""
        if self._server is None:
            raise RuntimeError("the relay is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> MeteringProxy:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread; returns self."""
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.proxy = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the upstream connections (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._client.close()

    def snapshot(self) -> tuple[dict[str, int], list[str]]:
        """(counters, fingerprints of the requests seen) to save in the run's state."""
        with self._lock:
            return dict(self.counts), sorted(self._seen)

    def relay(self, method: str, path: str, raw: bytes) -> tuple[int, bytes, str]:
        """Forward one request; returns (status, body, content type) for the service."""
        url = self.upstream + path.removeprefix("/v1")
        if method != "POST":
            return self._forward(method, url, raw)[:3]
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        kind = classify_request(body) if isinstance(body, dict) else "other"
        fingerprint = request_fingerprint(kind, body if isinstance(body, dict) else {}, raw)
        started = time.monotonic()
        status, data, content_type, outcome = self._forward(method, url, raw)
        elapsed_ms = int((time.monotonic() - started) * 1000)
        with self._lock:
            counts = self.counts
            counts["requests"] += 1
            counts["milliseconds"] += elapsed_ms
            counts[outcome] += 1
            # only an extraction asked again means a retried job; profile and summary prompts
            # repeat by design when nothing changed
            if kind in ("extraction", "repair") and fingerprint in self._seen:
                counts["repeated"] += 1
            else:
                counts[kind] += 1
            if kind in ("extraction", "repair"):
                self._seen.add(fingerprint)
            if outcome == "ok":
                self._meter_answer(kind, body, data)
        return status, data, content_type

    def _forward(self, method: str, url: str, raw: bytes) -> tuple[int, bytes, str, str]:
        headers = {**self._headers, "Content-Type": "application/json"}
        try:
            response = self._client.request(method, url, content=raw or None, headers=headers)
        except httpx.TimeoutException:
            return 504, _error("the model did not answer in time"), "application/json", "timeouts"
        except httpx.HTTPError as exc:
            message = f"the model is unreachable: {type(exc).__name__}"
            return 502, _error(message), "application/json", "connection_errors"
        outcome = "ok" if response.status_code < 400 else "http_errors"
        content_type = response.headers.get("content-type", "application/json")
        return response.status_code, response.content, content_type, outcome

    def _meter_answer(self, kind: str, body: Any, data: bytes) -> None:
        """Tokens and (for extraction) readability of one answered request; lock held."""
        try:
            payload = json.loads(data)
            text = _text(payload["choices"][0]["message"].get("content"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            payload, text = {}, ""
        usage = payload.get("usage") if isinstance(payload, dict) else None
        if isinstance(usage, dict) and "prompt_tokens" in usage:
            self.counts["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            self.counts["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        else:
            messages = body.get("messages") if isinstance(body, dict) else None
            self.counts["tokens_estimated"] += 1
            self.counts["prompt_tokens"] += sum(
                estimate_tokens(_text(m.get("content")))
                for m in messages or []
                if isinstance(m, dict)
            )
            self.counts["completion_tokens"] += estimate_tokens(text)
        if kind in ("extraction", "repair") and not extraction_answer_parses(text):
            self.counts["parse_failures"] += 1
            if len(self.unreadable) < 5:
                self.unreadable.append(text[:300])


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "relay_error"}}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the counters are the record."""

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        proxy: MeteringProxy = self.server.proxy  # type: ignore[attr-defined]
        status, data, content_type = proxy.relay(self.command, self.path, raw)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except ConnectionError:  # the service gave up waiting (its own timeout)
            pass

    do_GET = _serve
    do_POST = _serve
