"""Two API replicas without workers and one `worker` process on one PostgreSQL.

Each process is a real `python -m service …` child on the test's database. The replicas run no
job worker (MEMORY_RUN_WORKERS=false), so every extraction is the worker process's; each turn is
handed to both replicas at once, as a retrying filter behind a load balancer may do, and must
be extracted exactly once.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench.service_process import ServiceProcess, free_port
from service.config import Settings
from testkit.extraction_replies import echo_fact, new_user_message
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until, wait_until_async

TURNS = 12
CONNECTIONS = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
DEADLINE_S = 180.0


class _Process(ServiceProcess):
    """A service process on the test's database (ServiceProcess alone uses an embedded one)."""

    def __init__(self, *, database_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.database_url = database_url

    def _environment(self) -> dict[str, str]:
        env = super()._environment()
        env["DATABASE_URL"] = self.database_url
        return env


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(responder=echo_fact) as stub:
        yield stub


def _start(
    name: str,
    *,
    command: str,
    database_url: str,
    llm: LLMStub,
    key: str,
    tmp_path: Path,
    env: dict[str, str] | None = None,
) -> _Process:
    process = _Process(
        database_url=database_url,
        state_dir=tmp_path / name,
        port=free_port(),
        api_key=key,
        llm_base_url=llm.base_url,
        llm_model="stub-model",
        log_path=tmp_path / f"{name}.log",
        env={"MEMORY_RUN_WORKERS": "false", "MEMORY_BATCH_QUIET_S": "1", **(env or {})},
        command=command,
    )
    process.start()
    return process


def _turn(i: int) -> dict[str, Any]:
    # one sender per turn: facts this alike would be near-duplicates within one user's bank
    return {
        "chat": {"user_id": f"user-{i}", "chat_id": f"scale-chat-{i}", "kind": "saved"},
        "user_message_id": f"msg-{i}",
        "user_message": f"Remember that fact-s{i:03d} is on my list.",
    }


def _count(database_url: str, sql: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


async def test_turns_sent_to_two_replicas_are_extracted_once_by_the_worker_process(
    database_url: str, llm: LLMStub, tmp_path: Path
) -> None:
    key = secrets.token_urlsafe(16)
    replicas = [
        _start(n, command="serve", database_url=database_url, llm=llm, key=key, tmp_path=tmp_path)
        for n in ("api-a", "api-b")
    ]
    worker: _Process | None = None
    try:
        for replica in replicas:
            replica.wait_ready(120)
        # replicas without workers register no procrastinate worker and call no LLM
        assert _count(database_url, "SELECT count(*) FROM procrastinate_workers") == 0
        headers = {"Authorization": f"Bearer {key}"}
        clients = [
            httpx.AsyncClient(base_url=r.url, headers=headers, timeout=30, trust_env=False)
            for r in replicas
        ]
        try:
            answers = await asyncio.gather(
                *(c.post("/v1/turns", json=_turn(i)) for i in range(TURNS) for c in clients)
            )
        finally:
            for client in clients:
                await client.aclose()
        statuses = sorted(a.json()["status"] for a in answers)
        assert statuses == ["duplicate"] * TURNS + ["queued"] * TURNS, statuses
        assert _count(database_url, "SELECT count(*) FROM turns WHERE status = 'done'") == 0
        assert not llm.requests

        worker = _start(
            "worker", command="worker", database_url=database_url, llm=llm, key=key,
            tmp_path=tmp_path,
        )  # fmt: skip
        most_connections = 0

        def drained() -> bool:
            nonlocal most_connections, done
            done = _count(database_url, "SELECT count(*) FROM turns WHERE status = 'done'")
            most_connections = max(most_connections, _count(database_url, CONNECTIONS) - 1)
            assert done == TURNS or worker.running, worker.log_tail()
            return done == TURNS

        done = 0
        await wait_until_async(
            drained, what=f"{TURNS} turns done by the worker", timeout_s=DEADLINE_S, interval_s=0.2
        )
        # three processes, each within its stated budget (the sampling connection not counted)
        assert 0 < most_connections <= 3 * Settings().connection_budget(), most_connections
        assert done == TURNS, worker.log_tail()
        with psycopg.connect(database_url) as conn:
            facts = conn.execute(
                "SELECT substring(content from 'fact-s[0-9]+'), count(*) FROM memories "
                "WHERE status = 'active' GROUP BY 1 ORDER BY 1"
            ).fetchall()
        assert facts == [(f"fact-s{i:03d}", 1) for i in range(TURNS)]
        assert _count(database_url, "SELECT count(*) FROM procrastinate_workers") >= 1
        assert worker.terminate(60) == 0, worker.log_tail()
    finally:
        if worker is not None:
            worker.terminate(30)
        for replica in replicas:
            replica.terminate(30)


PERSONAL = [
    "User is vegetarian",
    "User owns a beagle named Pepper",
    "User works nights",
    "User lives in Valencia",
    "User is learning the bassoon",
]
TUESDAY = datetime(2026, 3, 3, 18, 0, tzinfo=UTC)


def _profile_writer(request: dict[str, Any]) -> str:
    if new_user_message(request):
        return '{"operations": []}'
    notes = request["messages"][-1]["content"]
    facts = [line.split(") ", 1)[1] for line in notes.splitlines() if line.startswith("- (")]
    return "PROFILE: " + "; ".join(sorted(facts))


@pytest.fixture
def replicas(database_url: str, tmp_path: Path) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Replica A runs the workers; replica B does not and degrades past 1 s."""
    key = secrets.token_urlsafe(16)
    with LLMStub(responder=_profile_writer) as llm:
        a = _start("api-a", command="serve", database_url=database_url, llm=llm, key=key,
                   tmp_path=tmp_path, env={"MEMORY_RUN_WORKERS": "true"})  # fmt: skip
        b = _start("api-b", command="serve", database_url=database_url, llm=llm, key=key,
                   tmp_path=tmp_path, env={"MEMORY_CONTEXT_DEADLINE_S": "1.0"})  # fmt: skip
        try:
            a.wait_ready(120)
            b.wait_ready(120)
            headers = {"Authorization": f"Bearer {key}"}
            with (
                httpx.Client(base_url=a.url, headers=headers, timeout=30) as ca,
                httpx.Client(base_url=b.url, headers=headers, timeout=30) as cb,
            ):
                yield ca, cb
        finally:
            a.terminate(30)
            b.terminate(30)


def _read(client: httpx.Client, message: str = "hello", **extra: Any) -> dict[str, Any]:
    chat = {"user_id": "pat", "chat_id": "c-1", "kind": "saved"}
    answer = client.post("/v1/context", json={"chat": chat, "message": message, **extra})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_a_memory_forgotten_through_one_replica_is_never_served_by_the_other(
    replicas: tuple[httpx.Client, httpx.Client], database_url: str
) -> None:
    a, b = replicas
    stale = reads = degraded = 0
    for cycle in range(3):
        ids = [
            a.post("/v1/users/pat/memories", json={"content": f"{fact} (cycle {cycle})"}).json()[
                "id"
            ]
            for fact in PERSONAL
        ]
        # B reads the profile A's worker wrote: now it is in B's degraded-path cache
        mark = f"cycle {cycle}"
        wait_until(
            lambda mark=mark: (p := _read(b)["profile"]) and mark in p,
            what=f"replica B's profile with {mark}",
            timeout_s=120,
        )
        forgotten = f"{PERSONAL[cycle]} (cycle {cycle})"
        assert a.delete(f"/v1/users/pat/memories/{ids[cycle]}").status_code == 204
        # B past its deadline (its tables locked): the cached profile must be gone
        with psycopg.connect(database_url) as lock:
            lock.execute("LOCK TABLE memories, profiles IN ACCESS EXCLUSIVE MODE")
            answer = _read(b)
            lock.rollback()
        degraded += answer["status"] == "memory was slow: answered with the cached profile only"
        stale += forgotten in answer["block"]
        reads += 1
        for _ in range(70):  # and on the normal path, interleaved with A's profile rewrite
            stale += forgotten in _read(b)["block"]
            reads += 1
        for memory_id in ids:
            a.delete(f"/v1/users/pat/memories/{memory_id}")
    assert (stale, reads, degraded) == (0, 213, 3)


def test_a_reminder_set_through_one_replica_fires_once_on_time_on_the_other(
    replicas: tuple[httpx.Client, httpx.Client],
) -> None:
    a, b = replicas
    # B learns that pat has no reminder pending (it would keep that for 30 s)
    assert _read(b, now=TUESDAY.isoformat())["reminders"] == []
    asked = _read(a, "remind me tomorrow to water the plants", now=TUESDAY.isoformat())
    assert asked["notice"].startswith("Reminder set: water the plants")
    wednesday = (TUESDAY + timedelta(days=1, hours=-8)).isoformat()  # 10:00 the next day
    fired = [r["content"] for r in _read(b, now=wednesday)["reminders"]]
    again = [r["content"] for r in _read(a, now=wednesday)["reminders"]]
    assert (fired, again) == (["water the plants"], [])
