"""Prometheus metrics and structured logs.

Metrics (text format at `GET /metrics`, bearer key required like every `/v1` call):

- `inlet_latency_seconds` (histogram): time to answer `POST /v1/context`, in the service
- `inlet_timeouts_total`: inlets that passed the service's own deadline
- `http_requests_total{route, method, status}`: requests by route *template*
- `extraction_outcomes_total{outcome}`: `written`, `nothing_new`, `already_done`,
  `invalid_output`, `gave_up`
- `extraction_parse_failures_total`: turns whose LLM answer stayed invalid after the repair
- `extraction_dropped_operations_total{reason}`: operations of an LLM answer not applied:
  `unknown_target` (an UPDATE or DELETE of a memory the LLM was not shown), `target_changed`
  (its memory was forgotten, edited or replaced while the LLM answered), `turn_closed` (its
  turn was discarded or extracted by another job meanwhile), `restated` (a DELETE of a fact
  the same batch states again), `forgotten_content` (the text of a memory forgotten meanwhile)
- `llm_failures_total{cause}`: extraction jobs of this process that failed on the LLM:
  `http_<status>` (e.g. `http_503`), `unreachable`, `bad_answer`
- `extraction_outcomes_all_processes_total{outcome}`,
  `extraction_parse_failures_all_processes_total`,
  `extraction_dropped_operations_all_processes_total{reason}`,
  `llm_failures_all_processes_total{cause}`: the same counters summed over every process of
  the installation, separate workers included (each process adds its counts to the database
  every `COUNTER_FLUSH_S`, flows/counters.py; read at scrape time, so every replica shows the
  same totals: do not sum them over replicas)
- `turns{status}` (gauge): ledger rows per status (`queued`, `done`, `failed`)
- `job_queue_depth{queue, status}` (gauge): jobs waiting (`todo`), running (`doing`) or due
  later (`scheduled`, e.g. the quiet checks of recent turns)
- `memories_without_vector` (gauge): memories waiting for a (re-)embedding
- `database_up` (gauge): 1 when the scrape could read the database
- `embedding_cache_hits_total`, `embedding_cache_misses_total`: query-embedding LRU cache
- `relevance_cache_hits_total`, `relevance_cache_misses_total`: LLM relevance-score cache

Labels never carry user ids, chat ids or memory content: routes are templates such as
`/v1/users/{user_id}/memories`, outcomes and statuses are fixed words. Gauges are read from
the database at scrape time, so they are right for every replica and after a restart.

Counters live at module level (one process serves one app); each app gets its own registry
that exposes them next to its scrape-time gauges, so several apps in one process (tests)
never collide.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.core import safety

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send


__all__ = [
    "CONTENT_TYPE",
    "JsonFormatter",
    "MetricsMiddleware",
    "ScrapeState",
    "ScrubFilter",
    "build_registry",
    "configure_logging",
    "record_ann_fallbacks",
    "record_dropped_operations",
    "record_extraction",
    "record_inlet_timeout",
    "render",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

INLET_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.8, 1.0, 2.0, 5.0)
"""Histogram buckets in seconds: dense up to the filter's default inlet timeout (0.8 s)."""

EXTRACTION_OUTCOMES = ("written", "nothing_new", "already_done", "invalid_output", "gave_up")
"""The only values of the `outcome` label."""

DROP_REASONS = (
    "unknown_target",
    "target_changed",
    "turn_closed",
    "restated",
    "forgotten_content",
    "past_cap",
    "planted_instruction",
    # parse_answer (service/core/extraction.py)
    "unknown_op",
    "malformed",
    "no_content",
    "bank_not_allowed",
    # the write path (service/flows/extraction.py, service/core/reconcile.py)
    "not_the_users",
    "unsupported",
    "from_assistant",
    "from_examples",
    "instruction_like",
)
"""The only values of the `reason` label of dropped operations."""

RECOVERY_KINDS = (
    "op_placeholder",
    "op_synonym",
    "op_missing",
    "message_ref_as_ref",
    "first_person",
    "bank_near_name",
    "bank_defaulted",
    "salvaged_truncated",
    "new_supersedes",
    "update_off_target",
)
"""The only values of the `kind` label of mended operations (what a sloppy model got wrong
and the service put right)."""

# no `*_created` series: a scrape shows values, not start times (unannotated in prometheus_client)
disable_created_metrics()  # type: ignore[no-untyped-call]

INLET_LATENCY = Histogram(
    "inlet_latency_seconds",
    "Time to answer POST /v1/context (seconds).",
    buckets=INLET_BUCKETS_S,
    registry=None,
)
INLET_TIMEOUTS = Counter(
    "inlet_timeouts", "Inlets that passed the service's own deadline.", registry=None
)
HTTP_REQUESTS = Counter(
    "http_requests",
    "HTTP requests by route template, method and status.",
    ["route", "method", "status"],
    registry=None,
)
EXTRACTIONS = Counter(
    "extraction_outcomes", "Extraction job runs by outcome.", ["outcome"], registry=None
)
ANN_FALLBACKS = Counter(
    "ann_exact_fallbacks",
    "Vector searches of a bank with its own HNSW index that returned too few rows and were "
    "done by an exact scan instead.",
    registry=None,
)
PARSE_FAILURES = Counter(
    "extraction_parse_failures",
    "Turns whose LLM answer was not valid operations JSON even after the repair retry.",
    registry=None,
)
DROPPED_OPERATIONS = Counter(
    "extraction_dropped_operations",
    "Operations of an LLM extraction answer that were not applied, by reason.",
    ["reason"],
    registry=None,
)
LLM_FAILURES = Counter(
    "llm_failures",
    "Extraction jobs of this process that failed on the LLM, by cause.",
    ["cause"],
    registry=None,
)
RECOVERED_OPERATIONS = Counter(
    "extraction_recovered_operations",
    "Operations of an LLM extraction answer that were mended instead of dropped, by kind.",
    ["kind"],
    registry=None,
)
for _kind in RECOVERY_KINDS:
    RECOVERED_OPERATIONS.labels(kind=_kind)
for _reason in DROP_REASONS:
    DROPPED_OPERATIONS.labels(reason=_reason)
for _outcome in EXTRACTION_OUTCOMES:  # every outcome is exported from the start, at 0
    EXTRACTIONS.labels(outcome=_outcome)

_SHARED: tuple[Collector, ...] = (
    INLET_LATENCY,
    INLET_TIMEOUTS,
    HTTP_REQUESTS,
    EXTRACTIONS,
    PARSE_FAILURES,
    ANN_FALLBACKS,
    DROPPED_OPERATIONS,
    LLM_FAILURES,
    RECOVERED_OPERATIONS,
)

SHARED_COUNTERS: dict[str, str | None] = {
    "extraction_outcomes": "outcome",
    "extraction_parse_failures": None,
    "extraction_dropped_operations": "reason",
    "llm_failures": "cause",
}
"""Counters every process adds to the installation's totals (name → its label, if any)."""

_SHARED_BY_NAME = {
    "extraction_outcomes": EXTRACTIONS,
    "extraction_parse_failures": PARSE_FAILURES,
    "extraction_dropped_operations": DROPPED_OPERATIONS,
    "llm_failures": LLM_FAILURES,
}
_last_event: dict[tuple[str, str], tuple[datetime, str | None]] = {}
"""(name, label) → when its latest event happened here, and a sentence about it."""


def _happened(name: str, label: str = "", detail: str | None = None) -> None:
    _last_event[(name, label)] = (datetime.now(UTC), detail)


def shared_counts() -> dict[tuple[str, str], tuple[int, datetime | None, str | None]]:
    """This process's values of `SHARED_COUNTERS`: (name, label) → (count since start, time of
    the latest event, a sentence about it).
    """
    found: dict[tuple[str, str], tuple[int, datetime | None, str | None]] = {}
    for name, counter in _SHARED_BY_NAME.items():
        label_name = SHARED_COUNTERS[name]
        for metric in counter.collect():
            for sample in metric.samples:
                if not sample.name.endswith("_total"):
                    continue
                label = sample.labels.get(label_name, "") if label_name else ""
                at, detail = _last_event.get((name, label), (None, None))
                found[(name, label)] = (int(sample.value), at, detail)
    return found


def record_llm_failure(cause: str, sentence: str) -> None:
    """Count one extraction job that failed on the LLM; `cause` is a fixed word
    (`http_503`, `unreachable`, `bad_answer`), `sentence` says it without any user content.
    """
    LLM_FAILURES.labels(cause=cause).inc()
    _happened("llm_failures", cause, sentence)


def record_extraction(outcome: str) -> None:
    """Count one extraction run; `outcome` is one of `EXTRACTION_OUTCOMES`.

    `invalid_output` also counts one `extraction_parse_failures_total`.
    """
    if outcome not in EXTRACTION_OUTCOMES:
        raise ValueError(f"unknown extraction outcome {outcome!r}")
    EXTRACTIONS.labels(outcome=outcome).inc()
    _happened("extraction_outcomes", outcome)
    if outcome == "invalid_output":
        PARSE_FAILURES.inc()
        _happened("extraction_parse_failures")


def record_dropped_operations(reason: str, count: int = 1) -> None:
    """Count `count` operations of an extraction answer not applied; `reason` is one of
    `DROP_REASONS`.
    """
    if reason not in DROP_REASONS:
        raise ValueError(f"unknown reason {reason!r}")
    if count > 0:
        DROPPED_OPERATIONS.labels(reason=reason).inc(count)
        _happened("extraction_dropped_operations", reason)


def record_recovered_operation(kind: str, count: int = 1) -> None:
    """Count `count` operations mended instead of dropped; `kind` is one of
    `RECOVERY_KINDS`.
    """
    if kind not in RECOVERY_KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    if count > 0:
        RECOVERED_OPERATIONS.labels(kind=kind).inc(count)


def record_inlet_timeout() -> None:
    """Count one inlet that passed the service's deadline and degraded."""
    INLET_TIMEOUTS.inc()


def record_ann_fallbacks(count: int) -> None:
    """Count vector searches that fell back from a bank's HNSW index to an exact scan."""
    if count > 0:
        ANN_FALLBACKS.inc(count)


# --- scrape-time values -------------------------------------------------------------------


class ScrapeState:
    """Values read from the database just before a scrape (set by the `/metrics` route)."""

    def __init__(self) -> None:
        self.database_up = 0  #: 1 when the last read succeeded
        self.turns: dict[str, int] = {}  #: ledger status → rows
        self.jobs: dict[tuple[str, str], int] = {}  #: (queue, status) → rows
        self.without_vector = 0  #: memories waiting for an embedding
        #: (name, label) → the installation's total of a SHARED_COUNTERS counter
        self.shared: dict[tuple[str, str], int] = {}


class _RuntimeCollector(Collector):
    """Database gauges from a `ScrapeState` and cache counters read off the runtime."""

    def __init__(self, state: ScrapeState, runtime: Any) -> None:
        self._state = state
        self._runtime = runtime  # a callable returning the live Runtime or None

    def collect(self) -> Iterable[Metric]:
        s = self._state
        up = GaugeMetricFamily("database_up", "1 when the scrape could read the database.")
        up.add_metric([], s.database_up)
        yield up
        turns = GaugeMetricFamily("turns", "Turn ledger rows per status.", labels=["status"])
        for status, n in sorted(s.turns.items()):
            turns.add_metric([status], n)
        yield turns
        jobs = GaugeMetricFamily(
            "job_queue_depth",
            "Jobs waiting (todo), running (doing) or due later (scheduled).",
            labels=["queue", "status"],
        )
        for (queue, status), n in sorted(s.jobs.items()):
            jobs.add_metric([queue, status], n)
        yield jobs
        pending = GaugeMetricFamily(
            "memories_without_vector", "Memories waiting for a (re-)embedding."
        )
        pending.add_metric([], s.without_vector)
        yield pending
        for name, label_name in SHARED_COUNTERS.items():
            family = CounterMetricFamily(
                f"{name}_all_processes",
                f"{name} summed over every process of the installation (from the database).",
                labels=[label_name] if label_name else None,
            )
            for (found, label), value in sorted(s.shared.items()):
                if found == name:
                    family.add_metric([label] if label_name else [], value)
            yield family
        rt = self._runtime()
        encoder = getattr(rt, "encoder", None)
        relevance = getattr(rt, "relevance_cache", None)
        for name, source, text in (
            ("embedding_cache_hits", encoder, "hits"),
            ("embedding_cache_misses", encoder, "misses"),
            ("relevance_cache_hits", relevance, "hits"),
            ("relevance_cache_misses", relevance, "misses"),
        ):
            family = CounterMetricFamily(name, f"Cache {text} of the {name.split('_')[0]} cache.")
            family.add_metric([], float(getattr(source, text, 0) or 0))
            yield family


def build_registry(state: ScrapeState, runtime: Any) -> CollectorRegistry:
    """A registry exposing the shared counters and this app's scrape-time values.

    Args:
        runtime: a callable returning the app's Runtime (None while starting).
    """
    registry = CollectorRegistry(auto_describe=False)
    for collector in _SHARED:
        registry.register(collector)
    registry.register(_RuntimeCollector(state, runtime))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus text format."""
    return generate_latest(registry)


# --- request metrics ----------------------------------------------------------------------


_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


class MetricsMiddleware:
    """ASGI middleware: counts requests by route template and times the inlet.

    The route template comes from the matched route (`scope["route"].path`), so a user id in
    the path never becomes a label; unmatched paths are counted as `unmatched`.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Time and count the HTTP request under its route template."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = str(scope.get("method", ""))
            method = method if method in _METHODS else "OTHER"  # labels stay a bounded set
            HTTP_REQUESTS.labels(route=route, method=method, status=str(status["code"])).inc()
            if route == "/v1/context" and method == "POST":
                INLET_LATENCY.observe(time.perf_counter() - started)


# --- structured logs ----------------------------------------------------------------------

_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{8,}")
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {
    "message",
    "asctime",
    "color_message",
}


def scrub(text: str) -> str:
    """`text` with bearer tokens, keys, card numbers and codes replaced by "[redacted]"."""
    return safety.redact_secrets(_BEARER.sub(r"\1 " + safety.REDACTED, text))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: `ts` (UTC ISO-8601), `level`, `logger`, `message`, extras.

    Messages and tracebacks pass through `scrub`, a second line of defence: log calls must
    already leave memory content and message text out (they log ids and counts).
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON line, message and traceback scrubbed."""
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = (
                    value
                    if isinstance(value, int | float | bool) or value is None
                    else scrub(str(value))
                )
        if record.exc_info:
            entry["exc"] = scrub(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


ACCESS_LOGGER = "uvicorn.access"
QUERY_REDACTED = "?" + safety.REDACTED


class ScrubFilter(logging.Filter):
    """Rewrites each record's message through `scrub` before any handler formats it.

    Access-log records keep their five arguments (uvicorn's AccessFormatter unpacks them):
    each is scrubbed, and the path loses its query string, which can carry a key
    (`?api_key=…`) or search text. Other records whose message changes get the scrubbed
    message with an empty argument tuple, which every formatter accepts.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Scrub the record in place; always keeps it."""
        if record.name == ACCESS_LOGGER and isinstance(record.args, tuple):
            record.args = tuple(_access_argument(a) for a in record.args)
            return True
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


def _access_argument(value: object) -> object:
    """An access-log argument without a query string or secrets; numbers stay numbers."""
    if not isinstance(value, str):
        return value
    path, mark, _query = value.partition("?")
    return scrub(path + QUERY_REDACTED if mark else value)


LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "procrastinate")
"""Loggers whose handlers are configured (root and the server's own)."""


def configure_logging(log_format: str) -> None:
    """Scrub secrets from every log line, and write JSON lines when `log_format` is "json".

    Runs in the app's lifespan, after the server configured its own loggers, and may run
    again (nothing is added twice). With "json" a root logger without handlers gets one on
    stderr.
    """
    if log_format == "json" and not logging.getLogger().handlers:
        logging.getLogger().addHandler(logging.StreamHandler())
    formatter = JsonFormatter() if log_format == "json" else None
    for name in LOGGERS:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, ScrubFilter) for f in handler.filters):
                handler.addFilter(ScrubFilter())
            if formatter is not None:
                handler.setFormatter(formatter)
