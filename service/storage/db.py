"""Engine, sessions and the embedded PostgreSQL.

One unit of work per request, job or command: entry points open a session with
`unit_of_work()` and commit once; storage functions only flush.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DataError, InterfaceError, OperationalError
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from service.errors import DatabaseUnavailable, InvalidInput

log = logging.getLogger(__name__)


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
            import pgserver
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise DatabaseUnavailable("the embedded PostgreSQL (pgserver) is not installed") from exc
    pgdata = state_dir.resolve() / "pgdata"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = pgserver.get_server(pgdata)
    except Exception as exc:
        raise DatabaseUnavailable(f"the embedded PostgreSQL in {pgdata} did not start: {exc}") from exc
    return str(server.get_uri()), server


def async_url(url: str) -> str:
    """A SQLAlchemy URL for psycopg 3 from any postgres URL."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """A plain libpq URL (for procrastinate and psql) from any postgres URL."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def create_engine(url: str, *, pool_size: int = 10) -> AsyncEngine:
    """Async engine for `url` with auto-prepare off.

    Server-side prepared statements could cache a generic plan for the vector query; turning
    auto-prepare off keeps every plan fresh (docs/discussions/retrieval.md).
    """
    return create_async_engine(
        async_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        connect_args={"prepare_threshold": None},
    )


@dataclass
class Database:
    """The engine and its session factory."""

    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]

    @classmethod
    def connect(cls, url: str, *, pool_size: int = 10) -> Database:
        engine = create_engine(url, pool_size=pool_size)
        return cls(engine, async_sessionmaker(engine, expire_on_commit=False))

    @contextlib.asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[AsyncSession]:
        """A session committed on success and rolled back on error."""
        async with self.sessions() as session:
            try:
                yield session
                await session.commit()
            except DataError as exc:
                await session.rollback()
                raise InvalidInput("a value cannot be stored: text with a NUL character, or a "
                                   "number out of range") from exc
            except (OperationalError, InterfaceError) as exc:
                with contextlib.suppress(Exception):  # the connection may be gone already
                    await session.rollback()
                raise DatabaseUnavailable(f"PostgreSQL is not reachable: {exc.orig or exc}") \
                    from exc
            except BaseException:
                await session.rollback()
                raise

    async def ping(self) -> None:
        """Raises DatabaseUnavailable unless a trivial query succeeds."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as exc:
            raise DatabaseUnavailable(f"PostgreSQL is not reachable: {exc}") from exc

    async def dispose(self) -> None:
        await self.engine.dispose()
