"""Scale-out figures: one vs two API processes beside a worker process, one vs two workers.

All processes are real `python -m service serve|worker` children on one PostgreSQL (embedded,
started here). Reported:

- **Read path**: `POST /v1/context` from C concurrent clients for T seconds against one API
  process, then against two (clients spread round-robin): requests per second, latency
  p50/p95 (ms), and CPU time of the API processes per request (ms, from /proc via psutil) —
  on a 2-core machine the clients and PostgreSQL share the cores, so CPU per request is the
  figure that carries over to bigger machines.
- **Write path**: N turns handed over at once, extracted against a stand-in LLM that takes a
  fixed delay per call, by one worker process, then by two: turns per second until drained.

    python -m bench.scale                    # writes bench/results/scale.{json,md}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg

from bench.service_process import ServiceProcess, free_port

RESULTS = Path(__file__).resolve().parent / "results"
TOPICS = (
    "hiking in the Alps",
    "a sourdough starter",
    "the quarterly budget",
    "learning Portuguese",
    "a vintage motorbike",
    "the garden's tomatoes",
    "a trip to Kyoto",
    "chess openings",
)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextmanager
def _database(folder: Path) -> Iterator[str]:
    from pgserver.postgres_server import get_server

    server = get_server(folder / "pgdata")
    try:
        with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE scale")
        yield str(server.get_uri("scale"))
    finally:
        server.cleanup()


def _process(
    folder: Path, name: str, *, command: str, url: str, key: str, llm: str, env: dict[str, str]
) -> ServiceProcess:
    process = ServiceProcess(
        state_dir=folder / name,
        port=free_port(),
        api_key=key,
        llm_base_url=llm,
        llm_model="stub-model",
        log_path=folder / f"{name}.log",
        env={"DATABASE_URL": url, **env},
        command=command,
    )
    process.start()
    return process


def _cpu_s(processes: list[ServiceProcess]) -> float:
    total = 0.0
    for process in processes:
        info = psutil.Process(process.pid)
        times = info.cpu_times()
        total += times.user + times.system
    return total


async def _seed(url: str, key: str, *, users: int, per_user: int) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        gate = asyncio.Semaphore(8)

        async def add(user: int, i: int) -> None:
            topic = TOPICS[i % len(TOPICS)]
            async with gate:
                await client.post(
                    f"/v1/users/scale-{user}/memories",
                    json={"content": f"User {user} note {i}: something about {topic} #{i}"},
                )

        await asyncio.gather(*(add(u, i) for u in range(users) for i in range(per_user)))


async def _read_load(
    urls: list[str], key: str, *, clients: int, duration_s: float, users: int
) -> list[float]:
    headers = {"Authorization": f"Bearer {key}"}
    latencies: list[float] = []
    stop_at = time.monotonic() + duration_s
    sessions = [
        httpx.AsyncClient(base_url=u, headers=headers, timeout=30, trust_env=False) for u in urls
    ]

    async def one_client(n: int) -> None:
        rng = random.Random(n)
        session = sessions[n % len(sessions)]
        sent = 0
        while time.monotonic() < stop_at:
            user = rng.randrange(users)
            sent += 1
            body = {
                "chat": {"user_id": f"scale-{user}", "chat_id": f"c-{user}", "kind": "saved"},
                # a message never sent before (client, count): its vector is computed as in a
                # real chat, never taken from the encoder's cache (issue 26)
                "message": f"what did I say about {rng.choice(TOPICS)}? ({n}-{sent})",
            }
            started = time.perf_counter()
            answer = await session.post("/v1/context", json=body)
            if answer.status_code == 200:
                latencies.append((time.perf_counter() - started) * 1000)

    try:
        await asyncio.gather(*(one_client(n) for n in range(clients)))
    finally:
        for session in sessions:
            await session.aclose()
    return latencies


def _read_figures(
    apis: list[ServiceProcess], key: str, *, clients: int, duration_s: float, users: int
) -> dict[str, Any]:
    # warm every process first: its caches and connections, not the figures
    asyncio.run(_read_load([a.url for a in apis], key, clients=2, duration_s=3, users=users))
    cpu_before = _cpu_s(apis)
    started = time.monotonic()
    latencies = asyncio.run(
        _read_load([a.url for a in apis], key, clients=clients, duration_s=duration_s, users=users)
    )
    elapsed = time.monotonic() - started
    cpu = _cpu_s(apis) - cpu_before
    return {
        "api_processes": len(apis),
        "clients": clients,
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p95_ms": round(_percentile(latencies, 0.95), 1),
        "api_cpu_ms_per_request": round(1000 * cpu / max(len(latencies), 1), 2),
    }


def _write_figures(
    folder: Path, url: str, key: str, llm: str, *, workers: int, turns: int, batch: int
) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM turns")
    api = _process(
        folder,
        f"w-api-{workers}",
        command="serve",
        url=url,
        key=key,
        llm=llm,
        env={"MEMORY_RUN_WORKERS": "false"},
    )
    procs = [api]
    try:
        procs += [
            _process(
                folder,
                f"worker-{workers}-{n}",
                command="worker",
                url=url,
                key=key,
                llm=llm,
                env={},
            )
            for n in range(workers)
        ]
        api.wait_ready(180)
        _until_workers(url, workers)
        started = time.monotonic()
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=api.url, headers=headers, timeout=30) as client:
            for i in range(turns):
                answer = client.post(
                    "/v1/turns",
                    json={
                        "chat": {
                            "user_id": f"w{batch}-{i}",
                            "chat_id": f"wc{batch}-{i}",
                            "kind": "saved",
                        },
                        "user_message_id": f"m-{i}",
                        "user_message": f"Remember that fact-w{batch}x{i:03d} is on my list.",
                    },
                )
                if answer.status_code >= 300:
                    raise RuntimeError(f"a turn was refused: {answer.text}")
        while True:
            with psycopg.connect(url) as conn:
                row = conn.execute("SELECT count(*) FROM turns WHERE status = 'done'").fetchone()
            if row and row[0] >= turns:
                break
            if time.monotonic() - started > 600:
                raise RuntimeError("the backlog did not drain in 10 minutes")
            time.sleep(0.2)
        elapsed = time.monotonic() - started
    finally:
        for process in procs:
            process.terminate(30)
    return {
        "worker_processes": workers,
        "turns": turns,
        "seconds_to_drain": round(elapsed, 1),
        "turns_per_s": round(turns / elapsed, 2),
    }


def _until_workers(url: str, count: int) -> None:
    """Wait until `count` job workers have registered (each worker process runs one)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM procrastinate_workers"
                " WHERE last_heartbeat > now() - interval '30 seconds'"
            ).fetchone()
        if row and row[0] >= count:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{count} worker processes did not start in 3 minutes")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both measurements; returns the figures written to the results files."""
    from testkit.extraction_replies import echo_fact
    from testkit.llm_stub import LLMStub

    delay_s = args.llm_delay_s

    def slow_echo(request: dict[str, Any]) -> str:
        time.sleep(delay_s)
        return echo_fact(request)

    key = secrets.token_urlsafe(16)
    folder = Path(tempfile.mkdtemp(prefix="memory-scale-"))
    with ExitStack() as stack, LLMStub(responder=slow_echo) as llm:
        url = stack.enter_context(_database(folder))
        no_workers = {"MEMORY_RUN_WORKERS": "false", "MEMORY_CONTEXT_DEADLINE_S": "5"}
        apis = [
            _process(
                folder,
                f"api-{n}",
                command="serve",
                url=url,
                key=key,
                llm=llm.base_url,
                env=no_workers,
            )
            for n in range(2)
        ]
        worker = _process(
            folder, "worker", command="worker", url=url, key=key, llm=llm.base_url, env={}
        )
        try:
            for api in apis:
                api.wait_ready(180)
            asyncio.run(_seed(apis[0].url, key, users=args.users, per_user=args.memories))
            reads = [
                _read_figures(
                    apis[:n],
                    key,
                    clients=args.clients,
                    duration_s=args.duration_s,
                    users=args.users,
                )
                for n in (1, 2)
            ]
        finally:
            for process in [*apis, worker]:
                process.terminate(30)
        writes = [
            _write_figures(folder, url, key, llm.base_url, workers=n, turns=args.turns, batch=n)
            for n in (1, 2)
        ]
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": psutil.cpu_count(), "python": sys.version.split()[0]},
        "settings": {
            "users": args.users,
            "memories_per_user": args.memories,
            "clients": args.clients,
            "duration_s": args.duration_s,
            "turns": args.turns,
            "llm_delay_s": delay_s,
            "worker_concurrency": 2,
        },
        "reads": reads,
        "writes": writes,
    }


def _markdown(figures: dict[str, Any]) -> str:
    s = figures["settings"]
    lines = [
        f"# Scale-out figures ({figures['date']}, {figures['machine']['cpus']} CPUs)",
        "",
        f"Read path: {s['clients']} clients × {s['duration_s']} s of `POST /v1/context`, "
        f"{s['users']} users × {s['memories_per_user']} memories, one worker process beside.",
        "",
        "| API processes | requests/s | p50 ms | p95 ms | API CPU ms / request |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in figures["reads"]:
        lines.append(
            f"| {r['api_processes']} | {r['requests_per_s']} | {r['p50_ms']} | {r['p95_ms']} "
            f"| {r['api_cpu_ms_per_request']} |"
        )
    lines += [
        "",
        f"Write path: {s['turns']} turns handed over at once, stand-in LLM "
        f"{s['llm_delay_s']} s per call, {s['worker_concurrency']} jobs at once per worker.",
        "",
        "| worker processes | seconds to drain | turns/s |",
        "|---:|---:|---:|",
    ]
    for w in figures["writes"]:
        lines.append(f"| {w['worker_processes']} | {w['seconds_to_drain']} | {w['turns_per_s']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--memories", type=int, default=50, help="memories per user")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration-s", type=float, default=20.0)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--llm-delay-s", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    figures = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(figures, indent=2) + "\n")
    (args.out / "scale.md").write_text(_markdown(figures))
    print(_markdown(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
