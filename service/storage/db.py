"""Engine, sessions and the embedded PostgreSQL.

One unit of work per request, job or command: entry points open a session with
`unit_of_work()` and commit once; storage functions only flush.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Loader
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from service.errors import DatabaseUnavailable, InvalidInput, MemoryServiceError

log = logging.getLogger(__name__)

POOLER_REFUSED_OPTIONS = "unsupported startup parameter"
"""PgBouncer's refusal of a libpq startup parameter it does not pass on (`options`)."""


def unreachable(cause: BaseException) -> DatabaseUnavailable:
    """The error to raise when a connection or statement failed with `cause`.

    A pooler that refuses the `options` startup parameter (PgBouncer, whose
    `ignore_startup_parameters` does not list it) is named with the setting that stops the
    service sending it, not reported as an unreachable database.
    """
    if POOLER_REFUSED_OPTIONS in str(cause):
        return DatabaseUnavailable(
            "DATABASE_URL leads to a connection pooler (PgBouncer?) that refuses the startup "
            f"parameters the service sends ({str(cause).strip()}): set "
            "MEMORY_DATABASE_POOLER=transaction, and MEMORY_LISTEN_DATABASE_URL to a direct "
            "URL of the database (docs/scaling.md, 'Behind a pooler')"
        )
    return DatabaseUnavailable(f"PostgreSQL is not reachable: {cause}")


def start_embedded(state_dir: Path) -> tuple[str, Any]:
    """Start (or attach to) the embedded PostgreSQL 16 + pgvector in `state_dir/pgdata`.

    Returns:
        (libpq URL over the unix socket, server handle). Keep the handle alive: the server
        stops when the last handle in any process is released.

    Raises:
        DatabaseUnavailable: when pgserver is missing or PostgreSQL does not start.
    """
    try:
        with warnings.catch_warnings():
            # pgserver falls back to a per-user runtime folder when XDG_RUNTIME_DIR is unset.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
            from pgserver.postgres_server import get_server
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise DatabaseUnavailable("the embedded PostgreSQL (pgserver) is not installed") from exc
    pgdata = state_dir.resolve() / "pgdata"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = get_server(pgdata)
    except Exception as exc:
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL in {pgdata} did not start: {exc}"
        ) from exc
    return str(server.get_uri()), server


def async_url(url: str) -> str:
    """A SQLAlchemy URL for psycopg 3 from any postgres URL."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """A plain libpq URL (for procrastinate and psql) from any postgres URL."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


PING_AFTER_IDLE_S = 10.0
"""A pooled connection unused for longer than this (seconds) is pinged before it is handed
out; busier ones are not, since the ping is a round trip on every request's path. When the
server restarts under a busy pool the first statement on a dead connection fails (the read
path answers without memories, jobs retry) and SQLAlchemy then replaces every pooled
connection ("optimistic" disconnect handling, SQLAlchemy docs: Connection Pooling)."""


def create_engine(
    url: str, *, pool_size: int = 10, server_settings: Mapping[str, str] | None = None
) -> AsyncEngine:
    """Async engine for `url` with auto-prepare off and idle connections pinged.

    Server-side prepared statements could cache a generic plan for the vector query; turning
    auto-prepare off keeps every plan fresh (docs/discussions/retrieval.md). The pool hands out
    the most recently used connection first (LIFO), so a steady load keeps a few warm
    connections and the rest stay idle.

    Args:
        server_settings: PostgreSQL settings every connection starts with (libpq `options`,
            after any the URL has), e.g. {"hnsw.ef_search": "100"}; also kept in each
            connection's `info["server_settings"]`, so a query can tell whether it must
            change one for its transaction.
    """
    settings = dict(server_settings or {})
    connect_args: dict[str, Any] = {"prepare_threshold": None}
    if settings:
        given = make_url(url).query.get("options")
        connect_args["options"] = " ".join(
            [
                *([given] if isinstance(given, str) else list(given or ())),
                *(f"-c {name}={value}" for name, value in settings.items()),
            ]
        )
    engine = create_async_engine(
        async_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_use_lifo=True,
        connect_args=connect_args,
    )

    @event.listens_for(engine.sync_engine.pool, "connect")
    def _started_with(dbapi_connection: Any, record: Any) -> None:
        record.info["server_settings"] = settings
        _read_any_timestamp(dbapi_connection.driver_connection)

    _ping_idle_connections(engine)
    return engine


_OLDEST = datetime(1, 1, 2, tzinfo=UTC)
_NEWEST = datetime(9999, 12, 30, tzinfo=UTC)
"""What a stored timestamp outside Python's years 1..9999 reads as (a day inside, so a
conversion to any time zone still fits)."""


_TIMESTAMPTZ_OID = psycopg.adapters.types["timestamptz"].oid
# psycopg's own loaders: its C ones when psycopg_binary is installed (about ten times faster
# than the pure-Python ones; the read path loads some 200 timestamps a turn)
_TEXT_LOADER = psycopg.adapters.get_loader(_TIMESTAMPTZ_OID, psycopg.pq.Format.TEXT)
_BINARY_LOADER = psycopg.adapters.get_loader(_TIMESTAMPTZ_OID, psycopg.pq.Format.BINARY)


_UNSTORABLE = "a value cannot be stored: text with a NUL character, or a number out of range"
"""The sentence of a DataError (PostgreSQL refused a value) in a read or a write."""


class _ClampedTimestamptzLoader(Loader):
    """timestamptz → datetime; a value Python cannot hold (1 BC, year 20000) reads as the
    nearest one it can, so one odd row never makes a user's memory unreadable.

    Reads through psycopg's own text loader (its C one where installed), not a subclass of
    the Python one, so every in-range value is parsed as psycopg parses it, at C speed.
    """

    def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        assert _TEXT_LOADER is not None  # psycopg always has one for timestamptz
        self._parse = _TEXT_LOADER(oid, context).load

    def load(self, data: Buffer) -> datetime:
        try:
            value: datetime = self._parse(data)
        except psycopg.DataError:
            raw = bytes(data)
            return _OLDEST if b"BC" in raw or raw.startswith(b"-") else _NEWEST
        return value


class _ClampedTimestamptzBinaryLoader(Loader):
    """The binary twin of `_ClampedTimestamptzLoader` (microseconds since 2000-01-01)."""

    format = psycopg.pq.Format.BINARY

    def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        assert _BINARY_LOADER is not None
        self._parse = _BINARY_LOADER(oid, context).load

    def load(self, data: Buffer) -> datetime:
        try:
            value: datetime = self._parse(data)
        except psycopg.DataError:
            return _OLDEST if int.from_bytes(bytes(data), "big", signed=True) < 0 else _NEWEST
        return value


def _read_any_timestamp(connection: Any) -> None:
    """Make `connection` (psycopg) read out-of-range timestamps as the nearest readable."""
    connection.adapters.register_loader("timestamptz", _ClampedTimestamptzLoader)
    connection.adapters.register_loader("timestamptz", _ClampedTimestamptzBinaryLoader)


def _ping_idle_connections(engine: AsyncEngine) -> None:
    """Ping connections idle for PING_AFTER_IDLE_S before use; a dead one is replaced."""
    pool = engine.sync_engine.pool
    dialect = engine.sync_engine.dialect

    @event.listens_for(pool, "checkin")
    def _idle_from(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info["idle_since"] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since < PING_AFTER_IDLE_S:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as exc:
            # the pool discards this connection and checks out another (up to three tries)
            raise DisconnectionError(f"pooled connection is dead: {exc}") from exc


async def _rollback(session: AsyncSession, failure: BaseException) -> None:
    """Roll back after `failure`; when the rollback cannot reach PostgreSQL either (the
    connection died during the unit of work), the outage is the answer: DatabaseUnavailable
    (503 with a sentence), unless `failure` is a flow's own answer (404, 400, …) or a
    cancellation, which stands. The pool replaces the dead connection on its next checkout.

    Raises:
        DatabaseUnavailable: the rollback failed on a lost connection.
    """
    try:
        await session.rollback()
    except (OperationalError, InterfaceError) as lost:
        if isinstance(failure, MemoryServiceError) or not isinstance(failure, Exception):
            # a flow's answer stands, and so does a cancellation (never turned into an error)
            log.info("rollback after %r failed, the connection is gone: %s", failure, lost)
            return
        log.warning("unit of work failed during a database outage: %r", failure)
        raise DatabaseUnavailable(f"PostgreSQL is not reachable: {lost.orig or lost}") from lost


@dataclass
class Database:
    """The engine and its session factory."""

    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    #: the PostgreSQL settings every pooled connection starts with (see `create_engine`)
    server_settings: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def connect(
        cls, url: str, *, pool_size: int = 10, server_settings: Mapping[str, str] | None = None
    ) -> Database:
        """Engine and sessions for `url` (see `create_engine` for the arguments)."""
        engine = create_engine(url, pool_size=pool_size, server_settings=server_settings)
        return cls(
            engine, async_sessionmaker(engine, expire_on_commit=False), dict(server_settings or {})
        )

    @contextlib.asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[AsyncSession]:
        """A session committed on success and rolled back on error."""
        async with self.sessions() as session:
            try:
                yield session
                await session.commit()
            except DataError as exc:
                await _rollback(session, exc)
                raise InvalidInput(_UNSTORABLE) from exc
            except (OperationalError, InterfaceError) as exc:
                with contextlib.suppress(Exception):  # the connection may be gone already
                    await session.rollback()
                raise unreachable(exc.orig or exc) from exc
            except BaseException as exc:
                await _rollback(session, exc)
                raise

    @contextlib.asynccontextmanager
    async def reads(self) -> AsyncIterator[AsyncSession]:
        """A session for reads only, in autocommit: each statement is its own transaction.

        Under READ COMMITTED a transaction gives its statements no common snapshot anyway, so
        a read-only unit of work needs no BEGIN and COMMIT: this saves those two round trips
        (the inlet's hot path). Not for writes, nor for `set_config(..., true)` (SET LOCAL):
        a setting would end with its own statement.

        Raises:
            InvalidInput: a value PostgreSQL cannot hold (a NUL character, a number out of
                range), as `unit_of_work` raises it.
            DatabaseUnavailable: PostgreSQL cannot be reached.
        """
        try:
            async with self.engine.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                async with AsyncSession(bind=conn, expire_on_commit=False) as session:
                    yield session
        except DataError as exc:
            raise InvalidInput(_UNSTORABLE) from exc
        except (OperationalError, InterfaceError) as exc:
            raise unreachable(exc.orig or exc) from exc

    async def ping(self) -> None:
        """Raises DatabaseUnavailable unless a trivial query succeeds."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as exc:
            raise unreachable(exc) from exc

    async def dispose(self) -> None:
        """Close the engine's connections."""
        await self.engine.dispose()
