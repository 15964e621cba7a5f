"""Fuzz the memory service's HTTP API from its own OpenAPI schema; count server errors.

Schemathesis turns `/openapi.json` into request generators for every operation, both valid
requests (positive) and requests that break the schema (negative: wrong types, missing
fields, out-of-range numbers, odd strings). Each generated request is sent with the bearer
key; every answer must be below 500. A fixed list of hand-written bad inputs (oversized
texts, NUL bytes, broken JSON, huge page sizes, …) is sent as well.

The run is bounded by a number of cases and a time limit, and only ever talks to the URL it
is given (127.0.0.1 when started from here).

    python -m bench.fuzz_api --cases 200 --time-s 120      # starts its own service
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

__all__ = ["FuzzReport", "bad_inputs", "run_fuzz"]

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class FuzzReport:
    """What a fuzz run sent and got back."""

    cases: int = 0  #: requests sent (generated and hand-written)
    generated: int = 0  #: of which generated from the schema
    operations: int = 0  #: operations in the schema
    by_status: Counter[int] = field(default_factory=Counter)  #: HTTP status → answers
    server_errors: list[dict[str, Any]] = field(default_factory=list)  #: the 5xx answers
    transport_errors: int = 0  #: requests that got no HTTP answer
    skipped: list[str] = field(default_factory=list)  #: operation runs with nothing to generate
    elapsed_s: float = 0.0  #: wall time of the run

    def as_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "generated": self.generated,
            "operations": self.operations,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "server_errors": len(self.server_errors),
            "server_error_examples": self.server_errors[:10],
            "transport_errors": self.transport_errors,
            "skipped": self.skipped,
            "elapsed_s": round(self.elapsed_s, 1),
        }


def bad_inputs() -> list[tuple[str, str, dict[str, Any]]]:
    """Hand-written bad requests: (method, path, httpx request kwargs)."""
    chat = {"user_id": "fuzz-user", "chat_id": "fuzz-chat", "kind": "saved"}
    big = "x" * 32_001
    return [
        ("POST", "/v1/context", {"json": {"chat": chat, "message": big}}),
        ("POST", "/v1/context", {"json": {"chat": {**chat, "user_id": ""}, "message": "hi"}}),
        ("POST", "/v1/context", {"json": {"chat": {**chat, "user_id": "a\x00b"}, "message": "hi"}}),
        ("POST", "/v1/context", {"json": {"chat": chat, "message": "nul \x00 byte"}}),
        ("POST", "/v1/context", {"json": {"chat": {**chat, "kind": "secret"}, "message": "hi"}}),
        ("POST", "/v1/context", {"json": {"chat": chat, "message": "hi", "budget_tokens": -1}}),
        ("POST", "/v1/context", {"json": {"chat": chat, "message": "hi", "now": "yesterday"}}),
        (
            "POST",
            "/v1/context",
            {"content": b'{"chat": {"user_id": ', "headers": {"Content-Type": "application/json"}},
        ),
        (
            "POST",
            "/v1/context",
            {"content": b"\xff\xfe\x00garbage", "headers": {"Content-Type": "application/json"}},
        ),
        (
            "POST",
            "/v1/context",
            {
                "content": b"chat=1",
                "headers": {"Content-Type": "application/x-www-form-urlencoded"},
            },
        ),
        (
            "POST",
            "/v1/context",
            {
                "json": {
                    "chat": chat,
                    "message": "\ud800 lone surrogate".encode("utf-8", "surrogatepass").decode(
                        "latin-1"
                    ),
                }
            },
        ),
        ("POST", "/v1/context", {"json": {"chat": chat, "message": "hi", "extra": 1}}),
        (
            "POST",
            "/v1/turns",
            {"json": {"chat": chat, "user_message_id": "m", "user_message": big}},
        ),
        (
            "POST",
            "/v1/turns",
            {"json": {"chat": chat, "user_message_id": "m\x00", "user_message": "hello"}},
        ),
        (
            "POST",
            "/v1/turns",
            {"json": {"chat": chat, "user_message_id": "m", "user_message": "a \x00 b"}},
        ),
        (
            "POST",
            "/v1/turns",
            {
                "json": {
                    "chat": chat,
                    "user_message_id": "m2",
                    "user_message": "hi",
                    "history": [{"role": "user", "content": "x"}] * 7,
                }
            },
        ),
        (
            "POST",
            "/v1/turns",
            {
                "json": {
                    "chat": chat,
                    "user_message_id": "m3",
                    "user_message": "hi",
                    "history": [{"role": "system", "content": "x"}],
                }
            },
        ),
        (
            "POST",
            "/v1/turns",
            {"json": {"chat": chat, "user_message_id": "x" * 256, "user_message": "hi"}},
        ),
        ("POST", "/v1/turns", {"json": [1, 2, 3]}),
        ("POST", "/v1/commands", {"json": {"chat": chat, "command": "/memory " + "a" * 4_000}}),
        ("POST", "/v1/commands", {"json": {"chat": chat, "command": "/memory add \x00"}}),
        ("POST", "/v1/commands", {"json": {"chat": chat, "command": "/memory forget 99999999"}}),
        ("POST", "/v1/commands", {"json": {"chat": chat, "command": "/memory edit ' OR 1=1 --"}}),
        ("GET", "/v1/users/fuzz-user/memories", {"params": {"limit": 201}}),
        ("GET", "/v1/users/fuzz-user/memories", {"params": {"limit": 0}}),
        ("GET", "/v1/users/fuzz-user/memories", {"params": {"offset": -1}}),
        ("GET", "/v1/users/fuzz-user/memories", {"params": {"offset": 10**30}}),
        ("GET", "/v1/users/fuzz-user/memories", {"params": {"bank": "everything"}}),
        ("GET", "/v1/users/" + "u" * 256 + "/memories", {}),
        ("GET", "/v1/users/fuzz-user/memories/not-a-uuid", {}),
        ("POST", "/v1/users/fuzz-user/memories", {"json": {"content": "y" * 2_001}}),
        ("POST", "/v1/users/fuzz-user/memories", {"json": {"content": "nul \x00 inside"}}),
        ("POST", "/v1/users/fuzz-user/memories", {"json": {"content": "ok", "tags": ["t"] * 11}}),
        ("POST", "/v1/users/fuzz-user/memories", {"json": {"content": "ok", "bank": "project"}}),
        (
            "PATCH",
            "/v1/users/fuzz-user/memories/00000000-0000-0000-0000-000000000000",
            {"json": {"content": ""}},
        ),
        ("DELETE", "/v1/users/fuzz-user/memories/00000000-0000-0000-0000-000000000000", {}),
        ("GET", "/v1/admin/turns", {"params": {"status": "exploded"}}),
        ("GET", "/v1/admin/turns", {"params": {"limit": 10**6}}),
        ("POST", "/v1/admin/turns/99999999999999999999999/retry", {}),
        ("POST", "/v1/admin/turns/-5/retry", {}),
    ]


def _record(report: FuzzReport, method: str, path: str, status: int, body: str, sent: Any) -> None:
    report.cases += 1
    report.by_status[status] += 1
    if status >= 500:
        report.server_errors.append(
            {
                "method": method,
                "path": path[:200],
                "status": status,
                "body": body[:300],
                "sent": ascii(sent)[:300],
            }
        )


def run_fuzz(
    base_url: str, api_key: str, *, max_cases: int = 200, max_time_s: float = 120.0
) -> FuzzReport:
    """Send generated and hand-written requests to `base_url`; count the answers.

    Args:
        max_cases: most generated requests (spread evenly over operations and over valid
            and invalid data); the hand-written ones come on top.
        max_time_s: no request is started after this many seconds.

    The generated data is derandomized: the same schema gives the same requests.
    """
    import schemathesis
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.core.result import Ok

    started = time.monotonic()
    deadline = started + max_time_s
    report = FuzzReport()
    # a fresh connection per request: an answer never depends on what the last one did to
    # a kept-alive connection
    headers = {"Authorization": f"Bearer {api_key}", "Connection": "close"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30, trust_env=False) as client:
        for method, path, kwargs in bad_inputs():
            if time.monotonic() >= deadline:
                break
            try:
                response = client.request(method, path, **kwargs)
            except httpx.HTTPError:
                report.cases += 1
                report.transport_errors += 1
                continue
            _record(report, method, path, response.status_code, response.text, kwargs)

    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", headers=headers, timeout=30)
    operations = [r.ok() for r in schema.get_all_operations() if isinstance(r, Ok)]
    report.operations = len(operations)
    modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    per_run = max(1, -(-max_cases // max(1, len(operations) * len(modes))))  # ceiling
    for operation in operations:
        for mode in modes:
            if time.monotonic() >= deadline or report.generated >= max_cases:
                break
            send = _sender(
                report,
                operation,
                mode,
                base_url=base_url,
                headers=headers,
                per_run=per_run,
                max_cases=max_cases,
                deadline=deadline,
            )
            try:
                send()
            except Unsatisfiable:  # nothing to break (no parameters, no body): valid only
                report.skipped.append(f"{operation.method.upper()} {operation.path} ({mode.value})")
    report.elapsed_s = time.monotonic() - started
    return report


def _sender(
    report: FuzzReport,
    operation: Any,
    mode: Any,
    *,
    base_url: str,
    headers: dict[str, str],
    per_run: int,
    max_cases: int,
    deadline: float,
) -> Any:
    """A Hypothesis test that sends `per_run` requests generated for one operation."""
    from hypothesis import HealthCheck, Phase, given, settings

    @settings(
        max_examples=per_run,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def send(case: Any) -> None:
        if time.monotonic() >= deadline or report.generated >= max_cases:
            return
        report.generated += 1
        try:
            response = case.call(base_url=base_url, headers=headers, timeout=30)
        except Exception:
            report.cases += 1
            report.transport_errors += 1
            return
        _record(
            report,
            operation.method.upper(),
            case.formatted_path,
            response.status_code,
            response.text,
            {"path_parameters": case.path_parameters, "query": case.query, "body": case.body},
        )

    return send


def main(argv: list[str] | None = None) -> int:
    """Start a service (embedded PostgreSQL in a temporary folder), fuzz it, write results."""
    from bench.service_process import ServiceProcess, free_port
    from testkit.llm_stub import LLMStub

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="generated requests")
    parser.add_argument("--time-s", type=float, default=120.0, help="time limit (seconds)")
    parser.add_argument("--out", type=Path, default=RESULTS / "reliability_fuzz.json")
    args = parser.parse_args(argv)
    key = secrets.token_urlsafe(16)
    with (
        tempfile.TemporaryDirectory(prefix="fuzz-") as tmp,
        LLMStub(responder=lambda _: json.dumps({"operations": []})) as llm,
    ):
        service = ServiceProcess(
            state_dir=Path(tmp) / "state",
            port=free_port(),
            api_key=key,
            llm_base_url=llm.base_url,
            llm_model="stub-model",
            log_path=Path(tmp) / "service.log",
        )
        service.start()
        try:
            service.wait_ready(300)
            report = run_fuzz(service.url, key, max_cases=args.cases, max_time_s=args.time_s)
        finally:
            service.terminate(60)
            service.stop_leftover_postgres()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    print(
        f"fuzz: {report.cases} requests ({report.generated} generated over "
        f"{report.operations} operations), {len(report.server_errors)} server errors, "
        f"{report.elapsed_s:.0f} s → {args.out}"
    )
    return 1 if report.server_errors or report.transport_errors else 0


if __name__ == "__main__":
    sys.exit(main())
