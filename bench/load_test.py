"""Loopback load: simulated users hit the service with inlet, outlet and command calls.

Each of N users runs its own loop for T seconds: it picks an inlet (`POST /v1/context`,
60 %), an outlet (`POST /v1/turns`, 30 %) or a command (`POST /v1/commands`, 10 %), sends it,
waits a short random think time, and goes again. Every user owns a unique word (its
*marker*, e.g. `quokka017x`) that is in every fact it states; the check afterwards is that no
answer to one user ever holds another user's marker (a cross-user leak), and that every fact
handed over in an accepted turn is stored exactly once.

Reported: requests per kind, throughput, latency percentiles (ms), errors (non-2xx answers and
failed requests), leaks, lost and duplicated facts. Everything is bounded: by the duration, a
request cap, a timeout per request and a drain limit; traffic goes only to the given URL
(127.0.0.1 when the service is started from here).

    python -m bench.load_test --users 20 --duration-s 30           # starts its own service
    python -m bench.load_test --url http://127.0.0.1:8765 --api-key KEY --users 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import secrets
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

__all__ = ["LoadReport", "echo_facts", "run_load", "stated_fact"]

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = (("inlet", 0.6), ("outlet", 0.3), ("command", 0.1))
MARKER = re.compile(r"\b(quokka\d{3}[a-z0-9]{4})")
FACT = re.compile(r"\bfact-(quokka\d{3}[a-z0-9]{4})-(\d+)\b")
_STATED = re.compile(r"remember (fact-quokka\d{3}[a-z0-9]{4}-\d+: [^.]+)\.")
# Facts of one user must not look alike, or deduplication (DESIGN §5.4) rightly merges them.
_COLOURS = (
    "amber",
    "blue",
    "crimson",
    "teal",
    "olive",
    "violet",
    "grey",
    "golden",
    "coral",
    "ivory",
    "jade",
    "maroon",
    "navy",
)
_THINGS = (
    "kettle",
    "bicycle",
    "violin",
    "telescope",
    "canoe",
    "typewriter",
    "lantern",
    "hammock",
    "chessboard",
    "kayak",
    "banjo",
    "sextant",
    "loom",
    "accordion",
    "easel",
    "tandem",
    "harp",
)
_PLACES = (
    "Oslo",
    "Lima",
    "Hanoi",
    "Quito",
    "Tunis",
    "Perth",
    "Riga",
    "Accra",
    "Cusco",
    "Nagoya",
    "Bergen",
    "Porto",
    "Dakar",
    "Tbilisi",
    "Cork",
    "Malmo",
    "Izmir",
    "Split",
    "Bilbao",
)


def stated_fact(marker: str, n: int) -> str:
    """The n-th fact of a user: its marker, a number and words unlike its other facts'."""
    return (
        f"fact-{marker}-{n}: my {_COLOURS[n % len(_COLOURS)]} "
        f"{_THINGS[(n * 7) % len(_THINGS)]} is in {_PLACES[(n * 11) % len(_PLACES)]}"
    )


def echo_facts(request: dict[str, Any]) -> str:
    """LLM stand-in answer for load turns: each new message's stated fact, as one memory."""
    from testkit.extraction_replies import new_op, new_user_messages

    return json.dumps(
        {
            "operations": [
                {**new_op(f"User said {found.group(1)}"), "message": ref}
                for ref, text in new_user_messages(request)
                if (found := _STATED.search(text))
            ]
        }
    )


@dataclass
class LoadReport:
    """What a load run did and saw."""

    users: int = 0  #: simulated users
    duration_s: float = 0.0  #: how long they sent requests
    requests: Counter[str] = field(default_factory=Counter)  #: requests per kind
    errors: Counter[str] = field(default_factory=Counter)  #: kind:status → failed requests
    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    leaks: list[dict[str, str]] = field(default_factory=list)  #: another user's marker seen
    own_seen: int = 0  #: answers holding the user's own marker (the check has teeth)
    facts_accepted: int = 0  #: facts in turns the service accepted (202 queued)
    facts_stored: int = 0  #: of which stored (exactly once each)
    facts_lost: int = 0  #: accepted but not stored after the drain
    facts_duplicated: int = 0  #: stored more than once
    drained: bool = False  #: the extraction queue emptied within the limit
    drain_s: float = 0.0  #: time the queue took to empty after the load

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def percentile(self, kind: str | None, q: float) -> float:
        values = sorted(v for k, vs in self.latencies_ms.items() if kind in (None, k) for v in vs)
        if not values:
            return 0.0
        return values[min(len(values) - 1, max(0, round(q / 100 * len(values)) - 1))]

    def as_dict(self) -> dict[str, Any]:
        kinds = [k for k, _ in KINDS]
        return {
            "users": self.users,
            "duration_s": round(self.duration_s, 1),
            "requests": self.total,
            "by_kind": {k: self.requests[k] for k in kinds},
            "throughput_rps": round(self.total / self.duration_s, 1) if self.duration_s else 0,
            "latency_ms": {
                k: {
                    "p50": round(self.percentile(k, 50), 1),
                    "p95": round(self.percentile(k, 95), 1),
                    "p99": round(self.percentile(k, 99), 1),
                    "mean": round(statistics.fmean(self.latencies_ms[k]), 1)
                    if self.latencies_ms.get(k)
                    else 0.0,
                }
                for k in kinds
                if self.requests[k]
            }
            | {
                "all": {
                    "p50": round(self.percentile(None, 50), 1),
                    "p95": round(self.percentile(None, 95), 1),
                    "p99": round(self.percentile(None, 99), 1),
                }
            },
            "errors": sum(self.errors.values()),
            "errors_by_kind": dict(self.errors),
            "leaks": len(self.leaks),
            "leak_examples": self.leaks[:5],
            "answers_with_own_memories": self.own_seen,
            "facts_accepted": self.facts_accepted,
            "facts_stored": self.facts_stored,
            "facts_lost": self.facts_lost,
            "facts_duplicated": self.facts_duplicated,
            "drained": self.drained,
            "drain_s": round(self.drain_s, 1),
        }


@dataclass
class _User:
    index: int
    user_id: str
    marker: str
    chat_id: str
    facts_sent: list[str] = field(default_factory=list)  #: facts in accepted turns
    turn: int = 0


def _chat(user: _User) -> dict[str, Any]:
    return {
        "user_id": user.user_id,
        "user_name": f"User {user.index}",
        "chat_id": user.chat_id,
        "kind": "saved",
    }


def _check_leak(report: LoadReport, user: _User, kind: str, text: str) -> None:
    found = set(MARKER.findall(text))
    report.own_seen += user.marker in found
    for marker in found - {user.marker}:
        report.leaks.append({"user": user.user_id, "saw": marker, "in": kind})


async def _one_request(
    client: httpx.AsyncClient, report: LoadReport, user: _User, kind: str, rng: random.Random
) -> None:
    if kind == "inlet":
        path = "/v1/context"
        body: dict[str, Any] = {
            "chat": _chat(user),
            "message": rng.choice(
                (
                    "What is my favourite animal?",
                    "What do you remember about my hobbies?",
                    f"Tell me about {user.marker}.",
                    "Suggest something for the weekend.",
                )
            ),
        }
    elif kind == "outlet":
        user.turn += 1
        path = "/v1/turns"
        body = {
            "chat": _chat(user),
            "user_message_id": f"{user.user_id}-m{user.turn}",
            "user_message": f"Please remember {stated_fact(user.marker, user.turn)}.",
            "assistant_message": "I will keep that in mind.",
        }
    else:
        path = "/v1/commands"
        body = {
            "chat": _chat(user),
            "command": rng.choice(
                ("/memory list", "/memory search animal", f"/memory search {user.marker}")
            ),
        }
    started = time.perf_counter()
    try:
        response = await client.post(path, json=body)
    except httpx.HTTPError as exc:
        report.errors[f"{kind}:{type(exc).__name__}"] += 1
        return
    finally:
        report.requests[kind] += 1
    report.latencies_ms[kind].append((time.perf_counter() - started) * 1000)
    if not 200 <= response.status_code < 300:
        report.errors[f"{kind}:{response.status_code}"] += 1
        return
    _check_leak(report, user, kind, response.text)
    if kind == "outlet" and response.json().get("status") == "queued":
        user.facts_sent.append(f"fact-{user.marker}-{user.turn}")


SETUP_TIMEOUT_S = 120.0
"""Per-request limit for the seeding, the drain's status polls and the final sweep: they are
not part of the measured load, so a slow answer there is waited for, not counted or raised."""


async def _seed(client: httpx.AsyncClient, user: _User) -> None:
    for text in (
        f"User's favourite animal is the {user.marker}",
        f"User collects postcards of {user.marker} sightings",
        f"User's hobby is photographing the {user.marker}",
    ):
        response = await client.post(
            f"/v1/users/{user.user_id}/memories", json={"content": text}, timeout=SETUP_TIMEOUT_S
        )
        response.raise_for_status()


async def _user_loop(
    client: httpx.AsyncClient,
    report: LoadReport,
    user: _User,
    *,
    deadline: float,
    think_s: float,
    max_requests: int,
    seed: int,
) -> None:
    rng = random.Random(seed)
    kinds = [kind for kind, _ in KINDS]
    weights = [weight for _, weight in KINDS]
    while time.monotonic() < deadline and report.total < max_requests:
        await _one_request(client, report, user, rng.choices(kinds, weights)[0], rng)
        if think_s:
            await asyncio.sleep(rng.uniform(0, 2 * think_s))


async def _drain(client: httpx.AsyncClient, report: LoadReport, timeout_s: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        status = (await client.get("/v1/status", timeout=SETUP_TIMEOUT_S)).json()
        if status["turns_queued"] == 0:
            report.drained = True
            break
        await asyncio.sleep(0.5)
    report.drain_s = time.monotonic() - started


async def _final_sweep(client: httpx.AsyncClient, report: LoadReport, users: list[_User]) -> None:
    """After the drain: every user's memories and context hold only their own marker, and
    each accepted fact is stored exactly once.
    """
    for user in users:
        response = await client.get(
            f"/v1/users/{user.user_id}/memories", params={"limit": 200}, timeout=SETUP_TIMEOUT_S
        )
        response.raise_for_status()
        _check_leak(report, user, "final list", response.text)
        stored = Counter(
            f"fact-{m}-{n}"
            for item in response.json()["items"]
            for m, n in FACT.findall(item["content"])
        )
        context = await client.post(
            "/v1/context",
            json={"chat": _chat(user), "message": f"What do you know about {user.marker}?"},
            timeout=SETUP_TIMEOUT_S,
        )
        _check_leak(report, user, "final context", context.text)
        report.facts_accepted += len(user.facts_sent)
        for fact in user.facts_sent:
            count = stored.get(fact, 0)
            report.facts_stored += count >= 1
            report.facts_lost += count == 0
            report.facts_duplicated += max(0, count - 1)


async def run_load(
    base_url: str,
    api_key: str,
    *,
    users: int = 20,
    duration_s: float = 30.0,
    think_s: float = 0.25,
    max_requests: int = 200_000,
    drain_s: float = 180.0,
    timeout_s: float = 10.0,
    seed: int = 7,
) -> LoadReport:
    """Run the load against `base_url` and check it.

    Args:
        users: simulated users, each its own request loop.
        duration_s: seconds the users send requests.
        think_s: mean pause between one user's requests (seconds; uniform 0..2xmean).
        max_requests: requests after which every user stops, whatever the clock says.
        drain_s: most seconds to wait for the extraction queue to empty afterwards.
        timeout_s: limit of one request (seconds); a request over it counts as an error.
    """
    run = secrets.token_hex(2)
    population = [
        _User(
            i,
            f"load-{run}-{i:03d}",
            f"quokka{i:03d}{secrets.token_hex(2)}",
            f"load-chat-{run}-{i:03d}",
        )
        for i in range(users)
    ]
    report = LoadReport(users=users)
    limits = httpx.Limits(max_connections=users + 4, max_keepalive_connections=users + 4)
    async with httpx.AsyncClient(
        base_url=base_url,
        timeout=timeout_s,
        limits=limits,
        headers={"Authorization": f"Bearer {api_key}"},
        trust_env=False,
    ) as client:
        await asyncio.gather(*(_seed(client, u) for u in population))
        started = time.monotonic()
        deadline = started + duration_s
        await asyncio.gather(
            *(
                _user_loop(
                    client,
                    report,
                    u,
                    deadline=deadline,
                    think_s=think_s,
                    max_requests=max_requests,
                    seed=seed * 1000 + u.index,
                )
                for u in population
            )
        )
        report.duration_s = time.monotonic() - started
        await _drain(client, report, drain_s)
        await _final_sweep(client, report, population)
    return report


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Load test: {report['users']} users x {report['duration_s']} s",
        "",
        f"{report['requests']} requests ({report['throughput_rps']} per second); "
        f"errors {report['errors']}, leaks {report['leaks']}, facts lost "
        f"{report['facts_lost']}, duplicated {report['facts_duplicated']} "
        f"({report['facts_accepted']} accepted).",
        "",
        "| kind | requests | p50 ms | p95 ms | p99 ms |",
        "|---|---|---|---|---|",
    ]
    for kind, numbers in report["latency_ms"].items():
        count = report["by_kind"].get(kind, report["requests"])
        lines.append(
            f"| {kind} | {count} | {numbers['p50']} | {numbers['p95']} | {numbers['p99']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the load (starting a service unless --url is given) and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--duration-s", type=float, default=30.0)
    parser.add_argument(
        "--think-s",
        type=float,
        default=0.25,
        help="mean pause between one user's requests (seconds)",
    )
    parser.add_argument("--url", help="an already running service (default: start one)")
    parser.add_argument("--api-key", help="its API key (with --url)")
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="MEMORY_STATE_DIR of the started service (default: a temp folder)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "reliability_load.json")
    args = parser.parse_args(argv)
    if args.url:
        report = asyncio.run(
            run_load(
                args.url,
                args.api_key or "",
                users=args.users,
                duration_s=args.duration_s,
                think_s=args.think_s,
            )
        )
    else:
        report = _with_service(args)
    figures = report.as_dict()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(_markdown(figures))
    print(_markdown(figures))
    bad = (
        figures["errors"]
        or figures["leaks"]
        or figures["facts_lost"]
        or figures["facts_duplicated"]
        or not figures["drained"]
    )
    return 1 if bad else 0


def _with_service(args: argparse.Namespace) -> LoadReport:
    from bench.service_process import ServiceProcess, free_port
    from testkit.llm_stub import LLMStub

    key = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="load-") as tmp, LLMStub(responder=echo_facts) as llm:
        state = args.state_dir or Path(tmp) / "state"
        service = ServiceProcess(
            state_dir=state,
            port=free_port(),
            api_key=key,
            llm_base_url=llm.base_url,
            llm_model="stub-model",
            log_path=Path(tmp) / "service.log",
        )
        service.start()
        try:
            service.wait_ready(300)
            return asyncio.run(
                run_load(
                    service.url,
                    key,
                    users=args.users,
                    duration_s=args.duration_s,
                    think_s=args.think_s,
                )
            )
        finally:
            service.terminate(60)
            service.stop_leftover_postgres()


if __name__ == "__main__":
    sys.exit(main())
