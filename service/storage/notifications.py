"""Cache invalidation across service processes with PostgreSQL LISTEN/NOTIFY.

A write that changes what a process may have cached (a profile written or withdrawn, a
reminder set) sends `pg_notify(CHANNEL, "<kind>:<user id>")` inside its own transaction, so the
notice goes out exactly when the change commits (PostgreSQL delivers notifications at commit,
and drops them on rollback). Every process listens on one dedicated connection.

The listener needs a direct connection: a pooler in transaction mode cannot keep LISTEN
(MEMORY_LISTEN_DATABASE_URL names one when DATABASE_URL goes through a pooler).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["CHANNEL", "PROFILE_CHANGE", "REMINDERS_CHANGE", "Change", "listening", "notify"]

CHANNEL = "memory_cache"
PROFILE_CHANGE = "profile"
"""A user's core profile was written, withdrawn or removed."""
REMINDERS_CHANGE = "reminders"
"""A reminder of the user was set."""
_NOTIFY = text("SELECT pg_notify(:channel, :payload)")


@dataclass(frozen=True, slots=True)
class Change:
    """One committed change: `kind` ("profile", "reminders") of `user_id`'s data."""

    kind: str
    user_id: str


async def notify(
    session: AsyncSession, *, kind: str, user_ids: list[str] | tuple[str, ...]
) -> None:
    """Tell every service process, at commit, that `kind` changed for `user_ids`."""
    for user_id in dict.fromkeys(user_ids):
        await session.execute(_NOTIFY, {"channel": CHANNEL, "payload": f"{kind}:{user_id}"})


@contextlib.asynccontextmanager
async def listening(conninfo: str) -> AsyncIterator[AsyncIterator[Change]]:
    """A LISTEN connection on CHANNEL; yields the stream of changes (ends when it breaks).

    Raises:
        psycopg.OperationalError: the database cannot be reached.
    """
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    try:
        await conn.execute(f"LISTEN {CHANNEL}")

        async def changes() -> AsyncIterator[Change]:
            async for note in conn.notifies():
                kind, _, user_id = note.payload.partition(":")
                yield Change(kind, user_id)

        yield changes()
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
