"""Where a warm context call spends its time: phases, SQL statements, a cProfile.

    python -m bench.profile_context                         # one user of 10,000 among 20,000
    python -m bench.profile_context --user-rows 10000 --total-rows 20000 --calls 200

Loads the table as `bench.latency_scale` does (its `load_table`, `LoadPlan`, owner indexes and
service `Runtime`), sends each message once (cold), then times `--calls` warm calls of
`service.flows.context.build_context` — the function `bench.latency_scale` measures — with:

- **phases**: wall time of the read path's steps, by wrapping the module functions the flow
  calls (steps run concurrently under `asyncio.gather`, so phases overlap and do not add up);
- **SQL**: every statement's execute time (SQLAlchemy cursor events), by statement, per call;
- **EXPLAIN (ANALYZE, BUFFERS)** of one warm candidates statement;
- **cProfile** of the warm calls (top functions by own time);
- **CPU per call**, this process's and PostgreSQL's (every process of the embedded server,
  from /proc), for the plain warm calls and for as many floor calls (`latency_scale.bare_floor`,
  one embedding + one bare pgvector top-10, here with the embedding cached like the context
  calls'): on a shared machine wall times follow the CPU a call needs, PostgreSQL's included.

Prints a text report; writes nothing. Nothing is downloaded (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import latency_scale

#: (module path, attribute) of the steps timed as phases.
PHASES: tuple[tuple[str, str], ...] = (
    ("service.flows.context", "recall"),
    ("service.flows.context", "_build"),
    ("service.flows.context", "retrieve"),
    ("service.flows.context", "_profile_or_core"),
    ("service.flows.context", "_record_use"),
    ("service.flows.reminders", "for_turn"),
    ("service.flows.candidates", "gather"),
    ("service.flows.relevance", "apply_llm_tier"),
    ("service.flows.profile", "read_profile"),
    ("service.storage.hybrid_search", "candidates"),
    ("service.storage.memory_search", "pairwise_similarity"),
    ("service.storage.memories", "core_memories"),
    ("service.storage.user_state", "record_use"),
    ("service.core.ranking", "fuse"),
    ("service.core.ranking", "score_fused"),
    ("service.core.ranking", "diversify"),
    ("service.core.ranking", "render_block"),
    ("service.core.injection", "compose"),
)


class Timings:
    """Milliseconds per name, appended by the wrappers and the SQL events."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = defaultdict(list)
        self.enabled = False

    def add(self, name: str, ms: float) -> None:
        if self.enabled:
            self.ms[name].append(ms)


def _wrap(timings: Timings, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                timings.add(name, (time.perf_counter() - started) * 1000.0)

        return timed_async

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            timings.add(name, (time.perf_counter() - started) * 1000.0)

    return timed


def instrument(timings: Timings) -> None:
    """Replace each PHASES function by a timed wrapper (module attributes, looked up per call)."""
    import importlib

    for module_name, attr in PHASES:
        module = importlib.import_module(module_name)
        name = f"{module_name.rsplit('.', 1)[1]}.{attr}"
        setattr(module, attr, _wrap(timings, name, getattr(module, attr)))


def _statement_name(statement: str) -> str:
    words = " ".join(statement.split())
    if "keyword_hit" in words:
        return "SQL candidates (vector + BM25)"
    if "set_config" in words:
        return "SQL set_config(hnsw.ef_search)"
    return "SQL " + words[:70]


def watch_sql(engine: Any, timings: Timings, captured: dict[str, Any]) -> None:
    """Time every statement on `engine`; keep the last candidates statement and its values."""
    from sqlalchemy import event

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _before(conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        conn.info.setdefault("started", []).append(time.perf_counter())
        if "keyword_hit" in statement:
            captured["candidates"] = (statement, parameters)

    @event.listens_for(engine.sync_engine, "after_cursor_execute")
    def _after(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        started = conn.info["started"].pop()
        timings.add(_statement_name(statement), (time.perf_counter() - started) * 1000.0)
        timings.add("SQL statements (count)", 1.0)

    @event.listens_for(engine.sync_engine, "commit")
    def _commit(_conn: Any) -> None:
        timings.add("SQL commits (count)", 1.0)


def server_cpu_ms(postmaster: int) -> float:
    """CPU time (user + system, ms) of the PostgreSQL server `postmaster` and its children so
    far, from /proc (Linux); 0.0 where /proc is missing.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir() if Path("/proc/self/stat").exists() else ():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        if int(entry.name) == postmaster or int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total * 1000.0 / ticks


async def cpu_per_call(
    call: Callable[[str], Any], messages: Sequence[str], postmaster: int
) -> tuple[list[float], float, float]:
    """Wall ms per call, then this process's and the server's CPU ms per call (means)."""
    wall: list[float] = []
    server, own = server_cpu_ms(postmaster), time.process_time()
    for message in messages:
        started = time.perf_counter()
        await call(message)
        wall.append((time.perf_counter() - started) * 1000.0)
    own_ms = (time.process_time() - own) * 1000.0 / len(messages)
    return wall, own_ms, (server_cpu_ms(postmaster) - server) / len(messages)


def _summary(timings: Timings, calls: int) -> str:
    lines = [f"{'phase':<58} {'n/call':>7} {'p50':>7} {'p95':>7} {'mean':>7}  ms"]
    for name, values in sorted(timings.ms.items(), key=lambda kv: -sum(kv[1])):
        if name.endswith("(count)"):
            lines.append(f"{name:<58} {len(values) / calls:>7.2f}")
            continue
        p50, p95 = np.percentile(values, [50, 95])
        lines.append(
            f"{name[:58]:<58} {len(values) / calls:>7.2f} {p50:>7.2f} {p95:>7.2f} "
            f"{statistics.fmean(values):>7.2f}"
        )
    return "\n".join(lines)


async def _use_records_written(context: Any) -> None:
    """Wait for the call's background write (its `/memory why` record), so calls do not overlap.

    Not `latency_scale._drain_background_tasks`: it also waits on the never-ending
    cache-notice listener, 2 s per call.
    """
    if context._pending:
        await asyncio.wait(set(context._pending))


async def explain(url: str, captured: dict[str, Any], repeats: int = 5) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the captured candidates statement, on its own connection."""
    import psycopg
    from pgvector.psycopg import register_vector_async

    if "candidates" not in captured:
        return "(no candidates statement seen)"
    statement, parameters = captured["candidates"]
    async with await psycopg.AsyncConnection.connect(url, autocommit=False) as conn:
        await register_vector_async(conn)
        # the first plan on a new connection also fills its catalog caches: keep the last
        runs = []
        for _ in range(repeats):
            cur = await conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters)
            runs.append([row[0] for row in await cur.fetchall()])
        summary = [
            " / ".join(line for line in run if line.startswith(("Planning", "Execution")))
            for run in runs
        ]
        # the same statement without EXPLAIN, timed by this client (send, plan, run, receive)
        plain = []
        for _ in range(repeats):
            started = time.perf_counter()
            cur = await conn.execute(statement, parameters)
            await cur.fetchall()
            plain.append(f"{(time.perf_counter() - started) * 1000.0:.2f}")
        await conn.rollback()
        return "\n".join(
            [
                "runs: " + "; ".join(summary),
                "the statement alone on a plain psycopg connection (ms): " + ", ".join(plain),
                *runs[-1],
            ]
        )


async def run(args: argparse.Namespace) -> str:
    for name in list(os.environ):
        if name.startswith(("MEMORY_", "LLM_")) or name == "DATABASE_URL":
            os.environ.pop(name)
    from service.embeddings.encoder import Encoder
    from service.flows import context
    from service.storage import migrate

    out: list[str] = []
    rng = np.random.default_rng(args.seed + 1)
    with tempfile.TemporaryDirectory(prefix="profile-context-") as tmp:
        root = Path(tmp)
        db = latency_scale.Database(root)
        try:
            migrate.upgrade(db.url)
            plan = latency_scale.LoadPlan(args.total_rows, (args.user_rows,))
            load = latency_scale.load_table(db.url, plan, args.seed)
            encoder = Encoder()
            encoder.encode_sync(["warm-up"])
            load |= await latency_scale.build_owner_indexes(db, encoder, root / "s0")
            out.append(f"table: {args.total_rows:,} rows, user of {args.user_rows:,}; {load}")
            timings = Timings()
            captured: dict[str, Any] = {}
            instrument(timings)
            async with latency_scale.service_runtime(db.url, root / "s1", encoder) as rt:
                watch_sql(rt.db.engine, timings, captured)
                # instance methods the flow calls through the runtime
                rt.encoder.encode_one = _wrap(timings, "encoder.encode_one", rt.encoder.encode_one)
                rt.owner_indexes.cells = _wrap(
                    timings, "owner_indexes.cells", rt.owner_indexes.cells
                )
                chat = latency_scale._chat(f"bench-user-{args.user_rows}")
                messages = latency_scale.synthetic_messages(rng, args.calls)

                async def call(message: str) -> None:
                    await context.build_context(
                        rt, chat=chat, message=message, budget_tokens=None, now=None
                    )

                for message in messages:  # cold: every message embedded once
                    await call(message)
                await _use_records_written(context)
                # 1. phase timers only (the wrappers cost a few µs per step)
                timings.enabled = True
                phased: list[float] = []
                for message in messages:
                    started = time.perf_counter()
                    await call(message)
                    phased.append((time.perf_counter() - started) * 1000.0)
                    await _use_records_written(context)
                timings.enabled = False
                phased_load = os.getloadavg()[0]
                # 2. cProfile (slows Python-heavy steps: read it for where, not how long)
                profiler = cProfile.Profile()
                for message in messages:
                    profiler.enable()
                    await call(message)
                    profiler.disable()
                    await _use_records_written(context)
                # 3. plain, back to back as in bench.latency_scale (a call's background write
                # overlaps the next call), then as many floor calls
                postmaster = int(db._server.get_pid() or 0)  # 0: no server CPU counted
                plain, cpu_ms, pg_ms = await cpu_per_call(call, messages, postmaster)
                await _use_records_written(context)
                floor = latency_scale.bare_floor(rt, user_id=f"bench-user-{args.user_rows}")
                floor_ms, floor_cpu, floor_pg = await cpu_per_call(floor, messages, postmaster)
                plain_load = os.getloadavg()[0]
                out.append(
                    f"warm build_context, {len(plain)} calls back to back, no timers: "
                    f"{latency_scale.percentiles(plain)}, load avg {plain_load:.2f}; "
                    f"CPU per call: service {cpu_ms:.2f} ms, PostgreSQL {pg_ms:.2f} ms\n"
                    f"floor (embedding cached), {len(floor_ms)} calls: "
                    f"{latency_scale.percentiles(floor_ms)}; "
                    f"CPU per call: service {floor_cpu:.2f} ms, PostgreSQL {floor_pg:.2f} ms"
                )
                out.append(
                    f"warm build_context with phase timers, each call's write awaited: "
                    f"{latency_scale.percentiles(phased)}, load avg {phased_load:.2f}"
                )
                out.append(_summary(timings, len(phased)))
                plan_text = await explain(db.url, captured)
                out.append("EXPLAIN (ANALYZE, BUFFERS), warm candidates statement:\n" + plan_text)
                stream = io.StringIO()
                stats = pstats.Stats(profiler, stream=stream)
                stats.sort_stats("tottime").print_stats(args.top)
                stats.sort_stats("cumulative").print_stats(args.top)
                out.append(stream.getvalue())
            encoder.close()
        finally:
            db.stop()
    return "\n\n".join(out)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile_context", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--user-rows", type=int, default=10_000, help="memories of the user")
    parser.add_argument("--total-rows", type=int, default=20_000, help="rows in the table")
    parser.add_argument("--calls", type=int, default=200, help="warm calls timed (default 200)")
    parser.add_argument("--top", type=int, default=35, help="cProfile rows printed")
    parser.add_argument("--seed", type=int, default=20_261_130, help="RNG seed")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the profile of warm context calls."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    print(asyncio.run(run(_parse_args(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
