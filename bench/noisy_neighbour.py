"""Noisy neighbour (issue 26): user B chats while user A does heavy things, on one service.

    python -m bench.noisy_neighbour                   # both modes: 5,000 imported, consolidated
    python -m bench.noisy_neighbour --import-items 1000 --phase-seconds 5     # a quick look
    python -m bench.noisy_neighbour --modes in-process,worker-process,worker-process-nice0

Each run is `python -m service serve` (a process of its own, on its own embedded PostgreSQL,
which it starts, as `make run` does) in one of `--modes` (`MODES`: job workers in the API
process, or in the `worker` process serve starts, at nice +10 with its database server
processes, or at nice 0), one after the other, `--rounds` times; the benchmark's clients and
an LLM stand-in (testkit.llm_stub) for extraction and summaries run in this process. User B
sends `POST /v1/context` with a message never seen before, and every third one a
`POST /v1/turns`, one after another, for the whole of each phase:

- **alone**: nothing else runs (`--phase-seconds`);
- **import**: A restores an export of `--import-items` memories (`POST …/memories/import`);
- **consolidation**: A's memories at MEMORY_CAP are consolidated (a `consolidate_owner` job,
  as the limit trigger queues it; the workers run it);
- **forget all**: A types `/memory forget all`, then the confirmation (`POST /v1/commands`);
- **long message**: A sends 15,000-character messages to `/v1/context` (`--phase-seconds`);
- **huge answer**: A hands over a turn whose extraction answer holds 20,000 operations.

- **users** (last): 1, then 20, then 50 users (`--users`) chatting at once, each one
  message after `--think-seconds` ±50 % of reading (starts spread over one think time),
  every third message a turn, for `--phase-seconds`; reported as the ratio of their
  p50 / p95 to one user's.

`--phases` runs some of them only (`alone` always runs first). B holds `--b-memories`
memories of its own (imported before `alone`), so its inlet ranks something.

Reported per phase: B's inlet p50 / p95 and their ratio to B alone, how many of B's calls
took longer than the filter's 0.8 s inlet timeout, how long A's operation took and the load
average. Goal (issue 26): every ratio ≤ 1.5 and none past the timeout. Figures: bench/results/
noisy_neighbour_modes.json and .md (`--name`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.latency_scale import FILTER_TIMEOUT_MS, percentiles, synthetic_messages
from bench.locomo import REPO_ROOT
from bench.service_process import ServiceProcess, free_port
from testkit.extraction_replies import is_chat_summary_request

__all__ = ["main", "run_benchmark"]

DEFAULT_OUT_DIR = REPO_ROOT / "bench" / "results"
USER_A, USER_B = "noisy-a", "quiet-b"
HUGE_MARKER = "HUGE-ANSWER-PLEASE"
HUGE_OPERATIONS = 20_000
LONG_MESSAGE_CHARS = 15_000
_TOPICS = ("hiking", "cooking", "chess", "sailing", "pottery", "jazz", "gardening", "cycling")


def _chat(user_id: str, chat_id: str) -> dict[str, Any]:
    return {"user_id": user_id, "kind": "saved", "chat_id": chat_id}


def responder(request: dict[str, Any]) -> str:
    """The LLM stand-in: summaries that cover their sources, the huge answer for A's marked
    turn, and no operation for everything else.
    """
    prompt = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
    if is_chat_summary_request(request):
        return json.dumps({"summary": "The user asked for ideas about things to do."})
    if "<source_memories>" in prompt:
        sources = re.findall(r"^\[(s\d+)\] \(\d{4}-\d{2}-\d{2}\) (.*)$", prompt, re.MULTILINE)
        text = "; ".join(t for _, t in sources)[:590]
        return json.dumps({"content": text, "covers": [r for r, _ in sources]})
    if HUGE_MARKER in prompt:
        return huge_answer()
    return json.dumps({"operations": []})


@functools.cache
def huge_answer() -> str:
    """The 20,000-operation answer (1.2 MB), made once before the phase: the stand-in runs in
    this process beside the service, and a real LLM's work is not the service's.
    """
    ops = [
        {"op": "NEW", "content": f"User likes colour number {i}", "bank": "personal"}
        for i in range(HUGE_OPERATIONS)
    ]
    return json.dumps({"operations": ops})


def export_of(n: int, *, rng: np.random.Generator) -> list[dict[str, Any]]:
    """`n` distinct memories of an export, some alike (so a consolidation finds clusters),
    dated 60-400 days ago (past the summarizer's age gate).
    """
    now = datetime.now(UTC)
    return [
        {
            "content": f"User enjoys {_TOPICS[i % len(_TOPICS)]} with friend number {i}",
            "bank": "personal",
            "created_at": (now - timedelta(days=int(rng.integers(60, 400)))).isoformat(),
        }
        for i in range(n)
    ]


class QuietUser:
    """User B: one inlet after another, a turn handed over every third message."""

    def __init__(self, client: httpx.AsyncClient, rng: np.random.Generator) -> None:
        self.client, self.rng = client, rng
        self.user_id = USER_B
        self.think_s = 0.0  #: reading time between two messages (0: back to back)
        self.sent = 0
        self.degraded = 0  #: answers past the service's own deadline (cached profile only)

    async def chat_while(self, running: asyncio.Future[Any] | None, seconds: float) -> list[float]:
        """B's inlet times (ms) until `running` is done (or `seconds` pass when None)."""
        times: list[float] = []
        deadline = time.perf_counter() + seconds
        if self.think_s:  # users arrive spread over one think time, not all at once
            await asyncio.sleep(self.think_s * float(self.rng.uniform(0.0, 1.0)))
        while (running is None and time.perf_counter() < deadline) or (
            running is not None and not running.done()
        ):
            message = synthetic_messages(self.rng, 1)[0]
            started = time.perf_counter()
            answer = await self.client.post(
                "/v1/context",
                json={"chat": _chat(self.user_id, f"{self.user_id}-chat"), "message": message},
            )
            times.append((time.perf_counter() - started) * 1000.0)
            answer.raise_for_status()
            self.degraded += answer.json().get("status", "").startswith("memory was slow")
            self.sent += 1
            if self.sent % 3 == 0:
                await self.client.post(
                    "/v1/turns",
                    json={
                        "chat": _chat(self.user_id, f"{self.user_id}-chat"),
                        "user_message_id": f"{self.user_id}-{self.sent}",
                        "user_message": message,
                        "assistant_message": "Sure.",
                    },
                )
            if self.think_s:  # ±50 %, so users do not send in step
                await asyncio.sleep(self.think_s * float(self.rng.uniform(0.5, 1.5)))
        return times


async def _timed(operation: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = await operation()
    return result, time.perf_counter() - started


async def _until(check: Callable[[], Awaitable[bool]], *, timeout_s: float) -> None:
    deadline = time.perf_counter() + timeout_s
    while not await check():
        if time.perf_counter() > deadline:
            raise TimeoutError("the operation did not finish in time")
        await asyncio.sleep(0.2)


@dataclass
class _UserA:
    """User A's heavy operations, each returning a short detail for the phase row."""

    client: httpx.AsyncClient
    conn: Any  # psycopg.AsyncConnection, autocommit
    db_url: str
    args: argparse.Namespace
    rng: np.random.Generator
    export_body: bytes = b""

    async def scalar(self, sql: str, *params: Any) -> Any:
        row = await (await self.conn.execute(sql, params)).fetchone()
        return row[0] if row else None

    def prepare_import(self) -> None:
        """Make A's export (0.2 s of CPU for 5,000) before the phase: B's client shares this
        process, and the client's work is not the service's.
        """
        export = export_of(self.args.import_items, rng=self.rng)
        self.export_body = json.dumps(export).encode()

    async def import_memories(self) -> Any:
        answer = await self.client.post(
            f"/v1/users/{USER_A}/memories/import",
            content=self.export_body,
            headers={"Content-Type": "application/json"},
        )
        answer.raise_for_status()
        return answer.json()

    async def consolidate(self) -> Any:
        from service.jobs.app import build_job_app
        from service.storage.db import libpq_url

        jobs = build_job_app(libpq_url(self.db_url))
        async with jobs.open_async():
            await jobs.configure_task("consolidate_owner", queue="consolidation").defer_async(
                owner_kind="user", owner_id=USER_A
            )

        async def done() -> bool:
            left: int = await self.scalar(
                "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'consolidate_owner'"
                " AND status IN ('todo', 'doing')"
            )
            return left == 0

        await _until(done, timeout_s=self.args.timeout_s)
        return await self.scalar(
            "SELECT outcome || ' ' || merged || ' merged, ' || pruned || ' pruned' FROM"
            " consolidation_runs WHERE owner_id = %s ORDER BY finished_at DESC LIMIT 1",
            USER_A,
        )

    async def forget_all(self) -> Any:
        chat = _chat(USER_A, "a-chat")
        ask = await self.client.post(
            "/v1/commands", json={"chat": chat, "command": "/memory forget all"}
        )
        code = re.search(r"/memory forget all ([0-9a-f]{6})", ask.json()["text"])
        if code is None:
            return ask.json()["text"][:80]
        done = await self.client.post(
            "/v1/commands",
            json={"chat": chat, "command": f"/memory forget all {code.group(1)}"},
        )
        return done.json()["text"][:80]

    async def long_messages(self) -> Any:
        body = ("I keep notes about my garden and my bicycle trips. " * 400)[:LONG_MESSAGE_CHARS]
        took: list[float] = []
        deadline = time.perf_counter() + self.args.phase_seconds
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await self.client.post(
                "/v1/context",
                json={"chat": _chat(USER_A, "a-chat"), "message": f"{len(took)} {body}"},
            )
            took.append((time.perf_counter() - started) * 1000.0)
        return {"a_long_message": percentiles(took)}

    async def huge_answer(self) -> Any:
        await self.client.post(
            "/v1/turns",
            json={
                "chat": _chat(USER_A, "a-chat"),
                "user_message_id": "a-huge",
                "user_message": f"{HUGE_MARKER}: my favourite colours, all of them",
                "assistant_message": "Noted.",
            },
        )

        async def extracted() -> bool:
            status = await self.scalar(
                "SELECT status FROM turns WHERE user_message_id = 'a-huge' LIMIT 1"
            )
            return status in ("done", "failed")

        await _until(extracted, timeout_s=self.args.timeout_s)
        return await self.scalar(
            "SELECT status || ', ' || coalesce(memories_written, 0) || ' written' FROM turns"
            " WHERE user_message_id = 'a-huge'"
        )


async def _phase(
    quiet: QuietUser,
    name: str,
    operation: Callable[[], Awaitable[Any]] | None,
    seconds: float,
) -> dict[str, Any]:
    """B chats while A runs `operation` (or, with None, for `seconds` alone): B's row."""
    degraded_before = quiet.degraded
    if operation is None:
        times = await quiet.chat_while(None, seconds)
        took, detail = None, None
    else:
        task = asyncio.ensure_future(_timed(operation))
        times = await quiet.chat_while(task, 0)
        detail, took = await task
    row = {"phase": name, "a_seconds": None if took is None else round(took, 2)}
    row |= {"detail": detail} | percentiles(times)
    row["past_filter_timeout"] = sum(t > FILTER_TIMEOUT_MS for t in times)
    row["degraded"] = quiet.degraded - degraded_before
    row["loadavg_1min"] = round(os.getloadavg()[0], 2)
    print(f"[{name}] B p50 {row['p50_ms']} ms p95 {row['p95_ms']} ms; A {took}", flush=True)
    return row


async def run_phases(base_url: str, api_key: str, db_url: str, args: argparse.Namespace) -> Any:
    """Every phase; returns {"phases": [...], "users": [...]} rows."""
    import psycopg

    rng = np.random.default_rng(args.seed)
    headers = {"Authorization": f"Bearer {api_key}"}
    phases: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(base_url=base_url, headers=headers, timeout=600) as b_client,
        httpx.AsyncClient(base_url=base_url, headers=headers, timeout=600) as a_client,
        await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn,
    ):
        quiet = QuietUser(b_client, rng)
        user_a = _UserA(a_client, conn, db_url, args, rng)
        if args.b_memories:
            seeded = await b_client.post(
                f"/v1/users/{USER_B}/memories/import", json=export_of(args.b_memories, rng=rng)
            )
            seeded.raise_for_status()
        await quiet.chat_while(None, 2.0)  # B's own first calls (connections, caches)
        phases.append(await _phase(quiet, "alone", None, args.phase_seconds))
        operations = (
            ("import", "import", user_a.import_memories),
            ("consolidation", "consolidation", user_a.consolidate),
            ("forget", "forget all", user_a.forget_all),
            ("long", "long message", user_a.long_messages),
            ("huge", "huge answer", user_a.huge_answer),
        )
        for key, name, operation in operations:
            if key == "huge":
                huge_answer()  # made before the phase starts (see its docstring)
            if key == "import":
                user_a.prepare_import()
            if key in args.phases:
                phases.append(await _phase(quiet, name, operation, args.phase_seconds))
    alone = phases[0]
    for row in phases:
        row["ratio_p50"] = _ratio(row["p50_ms"], alone["p50_ms"])
        row["ratio_p95"] = _ratio(row["p95_ms"], alone["p95_ms"])
    crowd = []
    if "users" in set(args.phases):
        async with httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=600,
            limits=httpx.Limits(max_connections=max(args.users) + 8),
        ) as client:
            crowd = await crowd_rows(client, rng, args)
    return {"phases": phases, "users": crowd}


async def crowd_rows(
    client: httpx.AsyncClient, rng: np.random.Generator, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """`n` users chatting at once for each n of `args.users`: their inlets' p50 / p95,
    and the ratio to the first n's (one user).
    """
    rows: list[dict[str, Any]] = []
    for n in args.users:
        users = [
            QuietUser(client, np.random.default_rng(int(rng.integers(1 << 31)))) for _ in range(n)
        ]
        for i, user in enumerate(users):
            user.user_id = f"crowd-{n}-{i}"
            user.think_s = args.think_seconds
        loads = [os.getloadavg()[0]]
        started = time.perf_counter()
        per_user = await asyncio.gather(*(u.chat_while(None, args.phase_seconds) for u in users))
        elapsed = time.perf_counter() - started
        loads.append(os.getloadavg()[0])
        times = [t for one in per_user for t in one]
        row: dict[str, Any] = {"users": n, "think_s": args.think_seconds}
        row |= percentiles(times)
        row["inlets_per_s"] = round(len(times) / elapsed, 1)
        row["past_filter_timeout"] = sum(t > FILTER_TIMEOUT_MS for t in times)
        row["degraded"] = sum(u.degraded for u in users)
        row["loadavg_1min"] = round(max(loads), 2)
        rows.append(row)
        print(f"[{n} users] p50 {row['p50_ms']} ms p95 {row['p95_ms']} ms", flush=True)
    for row in rows:
        row["ratio_p50"] = _ratio(row["p50_ms"], rows[0]["p50_ms"])
        row["ratio_p95"] = _ratio(row["p95_ms"], rows[0]["p95_ms"])
    return rows


def _ratio(a: Any, b: Any) -> float | None:
    return round(float(a) / float(b), 2) if a is not None and b else None


MODES: dict[str, dict[str, str]] = {
    # serve's settings per mode: where the job workers run, and at which priority
    "in-process": {"MEMORY_WORKER_PROCESS": "false"},
    "worker-process": {"MEMORY_WORKER_PROCESS": "true"},  # nice +10, its server processes too
    "worker-process-nice0": {"MEMORY_WORKER_PROCESS": "true", "MEMORY_WORKER_NICE": "0"},
}
"""`--modes`: how `python -m service serve` runs its job workers in each run of the phases."""


async def run_mode(mode: str, args: argparse.Namespace, tmp: Path, llm_url: str) -> Any:
    """`python -m service serve` in `mode` on its own embedded PostgreSQL (a fresh state
    folder, started by the service as `make run` starts it); every phase; its rows.
    """
    from service.storage.db import start_embedded

    state = tmp / mode
    # A holds the whole import; its consolidation is a limit run at the cap
    env = {
        "MEMORY_CAP": str(max(args.import_items, args.b_memories)),
        "MEMORY_CONTEXT_DEADLINE_S": "0.5",
        "MEMORY_BATCH_MESSAGES": "1",  # each turn extracted at once, in either mode
        **MODES[mode],
    }
    service = ServiceProcess(
        state_dir=state,
        port=args.port or free_port(),
        api_key="noisy-neighbour",
        llm_base_url=llm_url,
        llm_model="stub-model",
        log_path=(args.log_dir or tmp) / f"{tmp.name}-{mode}.log",
        env=env,
    )
    service.start()
    try:
        service.wait_ready(timeout_s=300)
        # a handle on the service's own embedded server, for A's checks and job
        url, server = start_embedded(state)
        try:
            results: dict[str, Any] = await run_phases(service.url, "noisy-neighbour", url, args)
        finally:
            service.terminate()
            server.cleanup()
    finally:
        service.terminate()
    results["mode"] = mode
    return results


async def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """Start the LLM stand-in; run every phase for each of `args.modes` in turn
    (`args.rounds` times), each mode a `serve` of its own.
    """
    from testkit.llm_stub import LLMStub

    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="noisy-neighbour-") as tmp,
        LLMStub(responder=responder) as llm,
    ):
        for round_no in range(1, args.rounds + 1):
            for mode in args.modes:
                print(f"=== round {round_no}, workers {mode}", flush=True)
                run = await run_mode(mode, args, Path(tmp) / f"r{round_no}", llm.base_url)
                run["round"] = round_no
                runs.append(run)
    return {
        "runs": runs,
        "meta": {
            "import_items": args.import_items,
            "phase_seconds": args.phase_seconds,
            "seed": args.seed,
            "b_memories": args.b_memories,
            "phases_run": list(args.phases),
            "modes": list(args.modes),
            "rounds": args.rounds,
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            "runtime_s": round(time.perf_counter() - started, 1),
            "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }


def _mode_table(run: dict[str, Any]) -> list[str]:
    lines = [
        "| phase | B's calls | B p50 | B p95 | ratio p50 | ratio p95 | past 0.8 s | degraded "
        "| A took (s) | load (1 min) | A's result |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in run["phases"]:
        detail = row["detail"]
        shown = json.dumps(detail) if isinstance(detail, dict) else (detail or "")
        lines.append(
            f"| {row['phase']} | {row['n']} | {row['p50_ms']} | {row['p95_ms']} "
            f"| {row['ratio_p50']} | {row['ratio_p95']} | {row['past_filter_timeout']} "
            f"| {row['degraded']} | {'–' if row['a_seconds'] is None else row['a_seconds']} "
            f"| {row.get('loadavg_1min', '')} | {shown[:100]} |"
        )
    if run.get("users"):
        lines += [
            "",
            "| users | think s | calls | inlets/s | p50 | p95 | ratio p50 | ratio p95 "
            "| past 0.8 s | degraded | load avg (max) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in run["users"]:
            lines.append(
                f"| {row['users']} | {row['think_s']} | {row['n']} | {row['inlets_per_s']} "
                f"| {row['p50_ms']} | {row['p95_ms']} | {row['ratio_p50']} | {row['ratio_p95']} "
                f"| {row['past_filter_timeout']} | {row['degraded']} | {row['loadavg_1min']} |"
            )
    return lines


def _comparison(runs: list[dict[str, Any]]) -> list[str]:
    """One row per phase, one column per run: ratio p50 / p95, past 0.8 s (load)."""
    names = [f"round {r['round']} {r['mode']}" for r in runs]
    lines = ["| phase | " + " | ".join(names) + " |", "|---|" + "---|" * len(runs)]
    for i, row in enumerate(runs[0]["phases"]):
        cells = []
        for run in runs:
            other = run["phases"][i]
            cells.append(
                f"{other['ratio_p50']} / {other['ratio_p95']}, {other['past_filter_timeout']}"
                f" ({other.get('loadavg_1min', '')})"
            )
        lines.append(f"| {row['phase']} | " + " | ".join(cells) + " |")
    for i, row in enumerate(runs[0].get("users") or []):
        cells = [
            f"{run['users'][i]['ratio_p50']} / {run['users'][i]['ratio_p95']}, "
            f"{run['users'][i]['past_filter_timeout']} ({run['users'][i]['loadavg_1min']})"
            for run in runs
        ]
        lines.append(f"| {row['users']} users | " + " | ".join(cells) + " |")
    return lines


def render_markdown(results: dict[str, Any]) -> str:
    """The results as a Markdown page: the modes side by side, then each run's tables."""
    meta = results["meta"]
    lines = [
        "# Noisy neighbour: user B's inlet while user A does heavy things",
        "",
        f"Finished {meta['finished']} in {meta['runtime_s']:.0f} s; A imports "
        f"{meta['import_items']:,} memories; B holds {meta.get('b_memories', 0):,}; load "
        f"average at the end {meta.get('loadavg_at_end')} (1/5/15 min, 2 shared cores). "
        "Each run is `python -m service serve` on its own embedded PostgreSQL (started by the "
        "service), the benchmark's clients and the LLM stand-in in another process; modes "
        "(where serve runs the job workers) one after the other: "
        + ", ".join(
            f"`{m}` ({', '.join(f'{k}={v}' for k, v in MODES[m].items())})" for m in meta["modes"]
        )
        + ". Times in ms; ratio = B's figure in the phase / B alone in the same run. Goal "
        "(issue 26): ≤ 1.5 and 0 past the filter's 0.8 s inlet timeout.",
        "",
        "## Side by side: ratio p50 / p95, B's calls past 0.8 s (load average, 1 min, at the "
        "phase's end; users: its max)",
        "",
        *_comparison(results["runs"]),
        "",
        "`degraded` = B's answers past the service's own 0.5 s deadline (cached profile only).",
    ]
    for run in results["runs"]:
        lines += ["", f"## Round {run['round']}, workers {run['mode']}", "", *_mode_table(run)]
    return "\n".join(lines) + "\n"


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--import-items", type=int, default=5_000, help="A's import (≤ 5,000)")
    parser.add_argument("--phase-seconds", type=float, default=20.0, help="alone / long message")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="longest wait per phase")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument(
        "--phases",
        type=lambda text: [p.strip() for p in text.split(",") if p.strip()],
        default=["import", "consolidation", "forget", "long", "huge", "users"],
        help="comma list of import,consolidation,forget,long,huge,users (alone always runs)",
    )
    parser.add_argument(
        "--users",
        type=lambda text: [int(x) for x in text.split(",")],
        default=[1, 20, 50],
        help="how many users chat at once in the users phase, the first the reference",
    )
    parser.add_argument("--think-seconds", type=float, default=2.0, help="users phase")
    parser.add_argument("--b-memories", type=int, default=200, help="B's own memories")
    parser.add_argument(
        "--modes",
        type=lambda text: [m.strip() for m in text.split(",") if m.strip()],
        default=["in-process", "worker-process"],
        help="where serve runs the job workers, one run each in this order: " + ", ".join(MODES),
    )
    parser.add_argument("--log-dir", type=Path, default=None, help="keep serve's logs here")
    parser.add_argument("--rounds", type=int, default=1, help="run the modes this many times")
    parser.add_argument("--port", type=int, default=0, help="serve's port (0: a free one)")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument("--name", default="noisy_neighbour_modes", help="files' name (.json/.md)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    unknown = set(args.modes) - set(MODES)
    if unknown:
        raise SystemExit(f"unknown mode {sorted(unknown)}: choose from {', '.join(MODES)}")
    results = asyncio.run(run_benchmark(args))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    base = args.out_dir / args.name
    base.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    base.with_suffix(".md").write_text(render_markdown(results), encoding="utf-8")
    print(render_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
