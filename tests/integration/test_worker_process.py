"""`serve` with MEMORY_WORKER_PROCESS=true: one command starts the API and a `worker` child
at a lower priority, SIGTERM stops both, a killed `serve` leaves no worker behind, `/readyz`
says whether the worker is up (issue 26 item 1); the worker's own database server processes
run at a lower priority on the embedded PostgreSQL, and only there."""

from __future__ import annotations

import os
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from bench.service_process import ServiceProcess, free_port
from service.storage import backend_priority
from service.storage.db import Database
from testkit.extraction_replies import echo_fact
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until
from tests.integration.test_scale_out import _turn


def _gone(pid: int) -> bool:
    """The process exited (reaped, or a zombie waiting for its new parent to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[1])


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(responder=echo_fact) as stub:
        yield stub


def _serve(pg_home: Path, llm: LLMStub, key: str) -> ServiceProcess:
    return ServiceProcess(
        state_dir=pg_home / "state",  # its own embedded PostgreSQL, as `make run` has
        port=free_port(),
        api_key=key,
        llm_base_url=llm.base_url,
        llm_model="stub-model",
        log_path=pg_home / "serve.log",
        env={"MEMORY_WORKER_PROCESS": "true", "MEMORY_BATCH_MESSAGES": "1"},
    )


def _worker_pid(serve: ServiceProcess, client: httpx.Client) -> int:
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.text
    workers = ready.json()["workers"]
    assert workers.startswith("worker process up (pid "), workers
    pid = int(workers.removeprefix("worker process up (pid ").rstrip(")"))
    assert _parent(pid) == serve.pid
    return pid


def test_serve_runs_the_workers_in_a_child_it_stops_and_that_dies_with_it(
    pg_home: Path, llm: LLMStub
) -> None:
    key = secrets.token_urlsafe(16)
    serve = _serve(pg_home, llm, key)
    headers = {"Authorization": f"Bearer {key}"}
    try:
        serve.start()
        serve.wait_ready(240)
        with httpx.Client(base_url=serve.url, headers=headers, timeout=30) as client:
            worker = _worker_pid(serve, client)
            # scheduled MEMORY_WORKER_NICE (10) lower than serve, which runs at its own
            assert os.getpriority(os.PRIO_PROCESS, worker) == min(
                19, os.getpriority(os.PRIO_PROCESS, serve.pid) + 10
            )
            # the child does the extraction: serve runs no job worker of its own
            assert client.post("/v1/turns", json=_turn(1)).json()["status"] == "queued"
            wait_until(
                lambda: client.get("/v1/users/user-1/memories").json()["items"],
                what="the turn extracted by the worker process",
                timeout_s=120,
            )
        # SIGTERM on serve (what Ctrl-C and `docker stop` do) stops both, cleanly
        # (uvicorn ends by raising the signal it caught again: -15 is its normal exit)
        assert serve.terminate() in (0, -signal.SIGTERM)
        assert _gone(worker)
        log = serve.log_path.read_text()
        assert log.index("service.cli.worker: worker stopped") < log.rindex("Finished server")

        serve.start()
        serve.wait_ready(240)
        with httpx.Client(base_url=serve.url, headers=headers, timeout=30) as client:
            worker = _worker_pid(serve, client)
        serve.kill()  # no shutdown code runs in serve: the child must notice on its own
        wait_until(lambda: _gone(worker), what="the orphaned worker to stop", timeout_s=60)
    finally:
        serve.terminate()
        serve.stop_leftover_postgres()


async def test_a_workers_server_processes_run_lower_only_on_its_own_data_folder(
    pg_server: object, database_url: str, tmp_path: Path
) -> None:
    pgdata = Path(str(pg_server.pgdata))  # type: ignore[attr-defined]
    postmaster = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    base = os.getpriority(os.PRIO_PROCESS, postmaster)
    elsewhere = tmp_path / "pgdata"  # a data folder another server would run on
    elsewhere.mkdir()
    (elsewhere / "postmaster.pid").write_text(f"{os.getpid()}\n")
    found = {}
    for name, folder in (("own", pgdata), ("other", elsewhere)):
        db = Database.connect(database_url, pool_size=1)
        backend_priority.lower_backends(db.engine, pgdata=folder, by=7)
        try:
            async with db.reads() as session:
                pid = int((await session.execute(text("SELECT pg_backend_pid()"))).scalar_one())
            # the pool's connection is handed out outside any transaction: a unit of work on it
            # commits as usual
            async with db.unit_of_work() as session:
                assert (await session.execute(text("SELECT 1"))).scalar_one() == 1
            found[name] = (os.getpriority(os.PRIO_PROCESS, pid), pid)
        finally:
            await db.dispose()
    assert found["own"][0] == min(19, base + 7)
    assert found["other"][0] == base
    assert not backend_priority.serves_data_folder(found["other"][1], elsewhere)
