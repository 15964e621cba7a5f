"""kill -9 of the service during a load of outlet calls: every accepted turn is extracted once.

The service runs as its own process (`python -m service serve`) on the test's database. Outlet
calls, each carrying a unique fact, go out a few at a time; half-way through the process is
SIGKILLed, with turns done, in extraction and waiting. It is started again, every turn is
handed over once more (as a replaying client would: the answers must be `duplicate` for what
the service had taken), and once the queue has drained each fact is stored exactly once.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench.service_process import ServiceProcess, free_port
from testkit.extraction_replies import echo_fact
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until_async
from tests.reliability.support import env_int, record_figures

DRAIN_S = 180.0
CONCURRENCY = 6


class _Service(ServiceProcess):
    """The service process on a given database (ServiceProcess uses an embedded one)."""

    def __init__(self, *, database_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.database_url = database_url

    def _environment(self) -> dict[str, str]:
        env = super()._environment()
        # Batched extraction with a short quiet period: each chat's turn waits as a scheduled
        # quiet check, which must survive the kill as well.
        env.update(
            {
                "DATABASE_URL": self.database_url,
                "MEMORY_WORKER_CONCURRENCY": "2",
                "MEMORY_BATCH_QUIET_S": "2",
            }
        )
        return env


def _slow_echo(request: dict[str, Any]) -> str:
    time.sleep(0.15)  # extraction in flight when the kill comes
    return echo_fact(request)


def _turn(i: int) -> dict[str, Any]:
    # one sender per turn: facts this alike would be near-duplicates within one user's bank
    return {
        "chat": {"user_id": f"u-{i}", "chat_id": f"kill-chat-{i}", "kind": "saved"},
        "user_message_id": f"msg-{i}",
        "user_message": f"Note for later: fact-k{i:03d} is on my list.",
    }


async def _send_all(
    client: httpx.AsyncClient, indices: list[int], *, stop_after: int | None, on_stop: Any
) -> dict[int, str]:
    """POST each turn (CONCURRENCY at once); returns index → answer status or error name."""
    answers: dict[int, str] = {}
    gate = asyncio.Semaphore(CONCURRENCY)
    killed = asyncio.Event()

    async def one(i: int) -> None:
        async with gate:
            if killed.is_set():
                answers[i] = "not_sent"
                return
            try:
                response = await client.post("/v1/turns", json=_turn(i))
                answers[i] = (
                    response.json()["status"]
                    if response.status_code == 202
                    else f"http_{response.status_code}"
                )
            except httpx.HTTPError as exc:
                answers[i] = type(exc).__name__
            if (
                stop_after is not None
                and not killed.is_set()
                and sum(a == "queued" for a in answers.values()) >= stop_after
            ):
                killed.set()
                on_stop()

    await asyncio.wait_for(asyncio.gather(*(one(i) for i in indices)), timeout=120)
    return answers


@pytest.mark.timeout(600)  # two service starts and a drain of up to DRAIN_S
async def test_every_accepted_turn_is_extracted_exactly_once_after_a_kill(
    database_url: str, state_dir: Path, tmp_path: Path
) -> None:
    total = env_int("RELIABILITY_KILL_TURNS", 40)
    key = secrets.token_urlsafe(16)
    with LLMStub(responder=_slow_echo) as llm:
        service = _Service(
            database_url=database_url,
            state_dir=state_dir,
            port=free_port(),
            api_key=key,
            llm_base_url=llm.base_url,
            llm_model="stub-model",
            log_path=tmp_path / "service.log",
        )
        service.start()
        try:
            service.wait_ready(120)
            headers = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(
                base_url=service.url, headers=headers, timeout=10, trust_env=False
            ) as client:
                # a first quarter, until some of it is extracted; then more, killed mid-way
                warm = total // 4
                first = await _send_all(client, list(range(warm)), stop_after=None, on_stop=None)

                async def some_done() -> bool:
                    return bool((await client.get("/v1/status")).json()["turns_done"] >= 2)

                await wait_until_async(some_done, what="two turns extracted", timeout_s=30)
                first |= await _send_all(
                    client, list(range(warm, total)), stop_after=total // 4, on_stop=service.kill
                )
                service.kill()
                accepted = sorted(i for i, a in first.items() if a == "queued")
                with psycopg.connect(database_url) as conn:
                    at_kill = dict(
                        conn.execute(
                            "SELECT status, count(*) FROM turns GROUP BY status"
                        ).fetchall()
                    )
                service.start()
                service.wait_ready(120)
                second = await _send_all(client, list(range(total)), stop_after=None, on_stop=None)

                async def drained() -> bool:
                    status = (await client.get("/v1/status")).json()
                    return bool(status["turns_queued"] == 0 and status["turns_done"] == total)

                await wait_until_async(
                    drained, what=f"all {total} turns done", timeout_s=DRAIN_S, interval_s=0.5
                )
        finally:
            service.terminate(30)
    assert accepted, first
    assert at_kill.get("done", 0) >= 2 and at_kill.get("queued", 0) >= 1, at_kill
    assert all(second[i] == "duplicate" for i in accepted), {i: second[i] for i in accepted}
    assert set(second.values()) <= {"duplicate", "queued"}, second
    with psycopg.connect(database_url) as conn:
        done = conn.execute("SELECT status, count(*) FROM turns GROUP BY status").fetchall()
        facts = conn.execute(
            "SELECT substring(content from 'fact-k[0-9]+'), count(*) FROM memories "
            "WHERE status = 'active' GROUP BY 1"
        ).fetchall()
    counts = dict(facts)
    assert dict(done) == {"done": total}, (done, service.log_tail())
    assert sorted(counts) == [f"fact-k{i:03d}" for i in range(total)]
    assert set(counts.values()) == {1}, {k: v for k, v in counts.items() if v != 1}
    record_figures(
        "kill_during_load",
        {
            "outlet_calls": total,
            "accepted_before_kill": len(accepted),
            "ledger_at_kill": at_kill,
            "answers_before_kill": _tally(first),
            "answers_after_restart": _tally(second),
            "turns_done": total,
            "facts_stored_once": len(counts),
            "lost": 0,
            "duplicated": 0,
        },
    )


def _tally(answers: dict[int, str]) -> dict[str, int]:
    tally: dict[str, int] = {}
    for answer in answers.values():
        tally[answer] = tally.get(answer, 0) + 1
    return tally
