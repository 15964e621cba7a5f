"""The connection pool: settings every connection starts with, idle connections pinged, dead
ones replaced. Real PostgreSQL; a backend is killed with pg_terminate_backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest
import sqlalchemy.exc
from sqlalchemy import text

from service.errors import DatabaseUnavailable, MemoryNotFound
from service.storage import db as db_module
from service.storage.db import Database


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database.connect(
        database_url, pool_size=1, server_settings={"hnsw.ef_search": "123"}
    )
    yield database
    await database.dispose()


async def _backend_pid(database: Database) -> int:
    async with database.unit_of_work() as session:
        return int((await session.execute(text("SELECT pg_backend_pid()"))).scalar_one())


def _terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)


async def test_connections_start_with_the_server_settings(database: Database) -> None:
    async with database.unit_of_work() as session:
        assert (await session.execute(text("SHOW hnsw.ef_search"))).scalar_one() == "123"
        info = (await session.connection()).info
        assert info["server_settings"] == {"hnsw.ef_search": "123"}
        # a setting changed for one transaction ends with it
        await session.execute(text("SELECT set_config('hnsw.ef_search', '300', true)"))
        assert (await session.execute(text("SHOW hnsw.ef_search"))).scalar_one() == "300"
    async with database.unit_of_work() as session:
        assert (await session.execute(text("SHOW hnsw.ef_search"))).scalar_one() == "123"


async def test_server_settings_keep_the_urls_own_options(database_url: str) -> None:
    separator = "&" if "?" in database_url else "?"
    database = Database.connect(
        f"{database_url}{separator}options=-c%20work_mem%3D7MB",
        server_settings={"hnsw.ef_search": "77"},
    )
    try:
        async with database.unit_of_work() as session:
            assert (await session.execute(text("SHOW work_mem"))).scalar_one() == "7MB"
            assert (await session.execute(text("SHOW hnsw.ef_search"))).scalar_one() == "77"
    finally:
        await database.dispose()


async def test_an_idle_dead_connection_is_pinged_and_replaced(
    database: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await _backend_pid(database)
    _terminate(database_url, first)
    monkeypatch.setattr(db_module, "PING_AFTER_IDLE_S", 0.0)  # every pooled connection is idle
    second = await _backend_pid(database)  # no error: the ping found it dead, a new one serves
    assert second != first


async def test_a_busy_dead_connection_fails_once_then_the_pool_recovers(
    database: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await _backend_pid(database)
    _terminate(database_url, first)
    monkeypatch.setattr(db_module, "PING_AFTER_IDLE_S", 3600.0)  # just used: not pinged
    with pytest.raises(DatabaseUnavailable):
        await _backend_pid(database)
    assert await _backend_pid(database) != first


async def test_a_flows_own_error_survives_a_rollback_on_a_killed_connection(
    database: Database, database_url: str
) -> None:
    """A unit of work whose connection dies before the flow answers (404 here): the
    rollback cannot reach the server; the flow's answer stands, and the pool recovers."""
    with pytest.raises(MemoryNotFound):
        async with database.unit_of_work() as session:
            pid = int((await session.execute(text("SELECT pg_backend_pid()"))).scalar_one())
            _terminate(database_url, pid)
            raise MemoryNotFound("no memory x for this user")
    assert await _backend_pid(database) != pid


@pytest.mark.parametrize(
    "raised",
    [
        RuntimeError("a step failed"),
        sqlalchemy.exc.ResourceClosedError("This result object is closed."),
    ],
)
async def test_a_rollback_during_an_outage_answers_unavailable_with_a_sentence(
    database: Database, database_url: str, raised: Exception
) -> None:
    """Any other failure of a unit of work whose connection is gone, and whose rollback so
    fails too, is the outage: DatabaseUnavailable (503 with a sentence). Before, the
    rollback's own error escaped unhandled (one 500 in a 120 s outage, issue 27)."""
    with pytest.raises(DatabaseUnavailable, match="PostgreSQL is not reachable"):
        async with database.unit_of_work() as session:
            pid = int((await session.execute(text("SELECT pg_backend_pid()"))).scalar_one())
            _terminate(database_url, pid)
            raise raised
    assert await _backend_pid(database) != pid
