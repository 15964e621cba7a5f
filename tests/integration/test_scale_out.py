"""Two API replicas without workers and one `worker` process on one PostgreSQL.

Each process is a real `python -m service …` child on the test's database. The replicas run no
job worker (MEMORY_RUN_WORKERS=false), so every extraction is the worker process's; each turn is
handed to both replicas at once, as a retrying filter behind a load balancer may do, and must
be extracted exactly once.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench.service_process import ServiceProcess, free_port
from tests.reliability.support import echo_fact
from tests.support.llm_stub import LLMStub

TURNS = 12
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
    name: str, *, command: str, database_url: str, llm: LLMStub, key: str, tmp_path: Path
) -> _Process:
    process = _Process(
        database_url=database_url,
        state_dir=tmp_path / name,
        port=free_port(),
        api_key=key,
        llm_base_url=llm.base_url,
        llm_model="stub-model",
        log_path=tmp_path / f"{name}.log",
        env={"MEMORY_RUN_WORKERS": "false", "MEMORY_BATCH_QUIET_S": "1"},
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
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            done = _count(database_url, "SELECT count(*) FROM turns WHERE status = 'done'")
            if done == TURNS:
                break
            assert worker.running, worker.log_tail()
            await asyncio.sleep(0.2)
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
