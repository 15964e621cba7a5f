"""Shared fixtures: one embedded PostgreSQL per run, a migrated template database cloned per
test, the real embedding model, and the service served over real HTTP."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from service.embeddings.encoder import Encoder
from service.storage import migrate
from testkit.live_service import LiveService

# Our variables must not leak in from the developer's shell.
for _name in list(os.environ):
    if _name.startswith(("MEMORY_", "LLM_", "EMBEDDING_")) and not _name.startswith(
        "MEMORY_TESTS_"  # the suite's own switches (tests/support/data_sets.py)
    ):
        os.environ.pop(_name)
    elif _name == "DATABASE_URL":
        os.environ.pop(_name)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

TEMPLATE_DB = "memory_template"
_db_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """The embedded PostgreSQL 16 + pgvector for the whole run.

    Its data lives in a folder of its own, not under pytest's temp root: pytest prunes old
    runs' folders there, which would pull the data dir away from a run going on beside it.
    """
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix="memory-tests-pg-"))
    server = pgserver.get_server(folder / "pgdata")
    yield server
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_home() -> Iterator[Path]:
    """An empty folder, outside pytest's temp root, for a test's own embedded PostgreSQL.

    As root, pgserver runs PostgreSQL as its `pgserver` user and opens the path up to it; any
    pytest run that starts meanwhile (a second suite on the machine) sets pytest's root back
    to 0700, and that PostgreSQL can no longer reach its data ("Permission denied" in initdb
    or pg_ctl stop, seen while a second suite ran on the same machine)."""
    folder = Path(tempfile.mkdtemp(prefix="memory-tests-own-pg-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _admin_url(server: object, database: str = "postgres") -> str:
    return str(server.get_uri(database))  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def template_database(pg_server: object) -> str:
    """A database migrated to head, cloned by `database_url` for each test."""
    with psycopg.connect(_admin_url(pg_server), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE_DB}")
        conn.execute(f"CREATE DATABASE {TEMPLATE_DB}")
    migrate.upgrade(_admin_url(pg_server, TEMPLATE_DB))
    return TEMPLATE_DB


@pytest.fixture
def database_url(pg_server: object, template_database: str) -> str:
    """A fresh, migrated database for one test."""
    name = f"test_{os.getpid()}_{next(_db_counter)}"
    with psycopg.connect(_admin_url(pg_server), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {template_database}")
    return _admin_url(pg_server, name)


@pytest.fixture(scope="session")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Encoder]:
    """The real all-MiniLM-L6-v2 on the default (ONNX) backend, exported and loaded once."""
    enc = Encoder(onnx_dir=tmp_path_factory.mktemp("models"))
    yield enc
    enc.close()


@pytest.fixture
def service_factory(database_url: str, encoder: Encoder, tmp_path: Path) -> Iterator[object]:
    """Start the service over real HTTP with extra settings: `service_factory(LLM_BASE_URL=…)`."""
    started: list[LiveService] = []

    def start(**env: str) -> LiveService:
        # The scripted answers of most tests are not what their messages say ("SEED" → a
        # fact): the support check would drop them. Tests of the check turn it on.
        env = {"MEMORY_EXTRACTION_SUPPORT_CHECK": "false", **env}
        live = LiveService.start(
            database_url=database_url,
            encoder=encoder,
            state_dir=tmp_path / f"state{len(started)}",
            env=env,
        )
        started.append(live)
        return live

    yield start
    for live in started:
        live.stop()


@pytest.fixture
def service(service_factory) -> LiveService:  # type: ignore[no-untyped-def]
    """The service with no LLM configured."""
    return service_factory()


@pytest.fixture
async def db_conn(database_url: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """A direct connection to the test's database, for checks in SQL."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        yield conn


# --- duration per tier (unit, integration, migration, reliability, …) ----------------------

_tier_seconds: dict[str, float] = {}
_tier_tests: dict[str, set[str]] = {}


def _tier(nodeid: str) -> str:
    """The folder under tests/ a test lives in ("unit" for tests/unit/test_x.py::test_y)."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Adds each test's setup, call and teardown time to its tier's total."""
    tier = _tier(report.nodeid)
    _tier_seconds[tier] = _tier_seconds.get(tier, 0.0) + report.duration
    _tier_tests.setdefault(tier, set()).add(report.nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per tier: its tests and the seconds they took (fixtures' setup included)."""
    if not _tier_seconds:
        return
    terminalreporter.section("duration per tier")
    for tier, seconds in sorted(_tier_seconds.items(), key=lambda item: -item[1]):
        tests = len(_tier_tests[tier])
        terminalreporter.write_line(f"{tier}: {seconds:.1f} s for {tests} tests")
