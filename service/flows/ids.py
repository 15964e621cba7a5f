"""The installation's short-id key, read from (or first written to) the database."""

from __future__ import annotations

from service.core import commands
from service.storage import installation
from service.storage.db import Database


async def install_short_id_key(db: Database) -> None:
    """Key this process's short ids with the installation's secret (made on first start).

    The secret lives in the database, not in the state dir, so every replica and worker
    process of one installation shows and accepts the same ids.

    Memories and reminders made before the keyed ids (migration 0011 recorded how many) keep
    the ids they had, so an upgrade changes no id a user has seen.
    """
    async with db.unit_of_work() as session:
        key = await installation.secret(session, commands.SHORT_ID_SECRET)
        memories = await installation.number(session, commands.SHORT_ID_LEGACY["memories"])
        reminders = await installation.number(session, commands.SHORT_ID_LEGACY["reminders"])
    commands.install_id_key(key, legacy_memories=memories, legacy_reminders=reminders)
