"""The service through PgBouncer in transaction mode (as managed PostgreSQL offers put it).

With MEMORY_DATABASE_POOLER=transaction the service sends no libpq options and no prepared
statements through the pooler, its job workers poll instead of LISTEN, and what needs a session
(cache notices, migrations, per-owner index builds) goes to MEMORY_LISTEN_DATABASE_URL.
"""

from __future__ import annotations

import secrets
import threading
from pathlib import Path

import httpx
import psycopg
import pytest

from bench.service_process import ServiceStartError, free_port
from testkit.extraction_replies import echo_fact
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until
from tests.integration.test_scale_out import _Process
from tests.support.pgbouncer import pgbouncer

TURNS = 6


def _pooled_transactions(pooled_url: str) -> int:
    """Transactions PgBouncer has passed on so far (its admin console, SHOW STATS)."""
    admin = pooled_url.rsplit("/", 1)[0] + "/pgbouncer"
    with psycopg.connect(admin, autocommit=True, prepare_threshold=None) as conn:
        cursor = conn.execute("SHOW STATS")
        names = [c.name for c in cursor.description or ()]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return sum(int(r["total_xact_count"]) for r in rows if r["database"] != "pgbouncer")


def _pooled_clients(pooled_url: str) -> int:
    """Client connections PgBouncer holds for the database now (SHOW CLIENTS, admin excluded)."""
    admin = pooled_url.rsplit("/", 1)[0] + "/pgbouncer"
    with psycopg.connect(admin, autocommit=True, prepare_threshold=None) as conn:
        cursor = conn.execute("SHOW CLIENTS")
        names = [c.name for c in cursor.description or ()]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return sum(r["database"] != "pgbouncer" for r in rows)


class _PeakClients:
    """Samples `_pooled_clients` in a thread until stopped; `peak` is the most seen."""

    def __init__(self, pooled_url: str) -> None:
        self.peak = 0
        self._url = pooled_url
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, _pooled_clients(self._url))

    def __enter__(self) -> _PeakClients:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


#: what one process may open to the pooler (docs/scaling.md, "Connections"): the pool and as
#: many overflow (MEMORY_DB_POOL_SIZE 10) and the job queue's pool (MEMORY_JOBS_POOL_SIZE 4);
#: the cache-notice listener and the index refresh go to MEMORY_LISTEN_DATABASE_URL
POOLED_BUDGET = 2 * 10 + 4


def test_the_service_works_through_pgbouncer_in_transaction_mode(
    database_url: str, tmp_path: Path
) -> None:
    key = secrets.token_urlsafe(16)
    with pgbouncer(database_url) as pooled, LLMStub(responder=echo_fact) as llm:
        service = _Process(
            database_url=pooled,
            state_dir=tmp_path / "state",
            port=free_port(),
            api_key=key,
            llm_base_url=llm.base_url,
            llm_model="stub-model",
            log_path=tmp_path / "service.log",
            env={
                "MEMORY_DATABASE_POOLER": "transaction",
                "MEMORY_LISTEN_DATABASE_URL": database_url,
            },
        )
        service.start()
        try:
            service.wait_ready(120)
            before = _pooled_transactions(pooled)
            headers = {"Authorization": f"Bearer {key}"}
            with (
                _PeakClients(pooled) as clients,
                httpx.Client(base_url=service.url, headers=headers, timeout=30) as client,
            ):
                for i in range(TURNS):
                    answer = client.post(
                        "/v1/turns",
                        json={
                            "chat": {"user_id": f"p-{i}", "chat_id": f"pc-{i}", "kind": "saved"},
                            "user_message_id": f"m-{i}",
                            "user_message": f"Remember that fact-p{i:03d} is on my list.",
                        },
                    )
                    assert answer.json()["status"] == "queued", answer.text
                wait_until(
                    lambda: client.get("/v1/status").json()["turns_done"] >= TURNS,
                    what=f"{TURNS} turns done through the pooler",
                    timeout_s=120,
                    interval_s=0.2,
                )
                chat = {"user_id": "p-2", "chat_id": "pc-2", "kind": "saved"}
                context = client.post(
                    "/v1/context", json={"chat": chat, "message": "what is fact-p002?"}
                ).json()
                [memory] = client.get("/v1/users/p-2/memories").json()["items"]
                forgotten = client.delete(f"/v1/users/p-2/memories/{memory['id']}")
                after_forget = client.get("/v1/users/p-2/memories").json()["items"]
            assert [m["content"] for m in context["memories"]] == ["User mentioned fact-p002"]
            assert (forgotten.status_code, after_forget) == (204, [])
            assert _pooled_transactions(pooled) > before
            assert "prepared statement" not in service.log_tail(400)
            print(f"peak client connections to the pooler: {clients.peak}")
            assert 0 < clients.peak <= POOLED_BUDGET
        finally:
            service.terminate(30)


def test_without_the_pooler_setting_the_refusal_names_the_setting(
    database_url: str, tmp_path: Path
) -> None:
    """Issue 29 item 5: PgBouncer refuses libpq `options`; the service said only "PostgreSQL is
    not reachable … unsupported startup parameter: options"."""
    with pgbouncer(database_url) as pooled:
        service = _Process(
            database_url=pooled,
            state_dir=tmp_path / "state",
            port=free_port(),
            api_key=secrets.token_urlsafe(16),
            llm_base_url="",
            llm_model="",
            log_path=tmp_path / "service.log",
        )
        service.start()
        try:
            with pytest.raises(ServiceStartError) as refused:
                service.wait_ready(120)
        finally:
            service.terminate()
    assert "set MEMORY_DATABASE_POOLER=transaction" in str(refused.value)
    assert "MEMORY_LISTEN_DATABASE_URL" in str(refused.value)
