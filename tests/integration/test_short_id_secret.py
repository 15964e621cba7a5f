"""The short-id key is one secret per installation, kept in its database (issue 14 item 7).

Replicas starting together race to create it and all end up with the same one; a service
started again on the same database shows the same ids; another installation shows others.
"""

from __future__ import annotations

import asyncio
import os

import psycopg

from service.core import commands
from service.flows.ids import install_short_id_key
from service.storage import installation
from service.storage.db import Database

SEQS = range(1, 201)


def _another_database(pg_server: object, template: str) -> str:
    name = f"test_{os.getpid()}_other_installation"
    admin = str(pg_server.get_uri("postgres"))  # type: ignore[attr-defined]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    return str(pg_server.get_uri(name))  # type: ignore[attr-defined]


async def _ids_after_start(url: str) -> list[str]:
    db = Database.connect(url, pool_size=2)
    try:
        await install_short_id_key(db)
    finally:
        await db.dispose()
    return [commands.encode_id(seq) for seq in SEQS]


async def test_replicas_starting_at_once_share_one_secret(database_url: str):
    databases = [Database.connect(database_url, pool_size=1) for _ in range(5)]

    async def read(db: Database) -> bytes:
        async with db.unit_of_work() as session:
            return await installation.secret(session, commands.SHORT_ID_SECRET)

    try:
        found = await asyncio.gather(*(read(db) for db in databases))
    finally:
        for db in databases:
            await db.dispose()

    assert len(set(found)) == 1
    assert len(found[0]) == installation.SECRET_BYTES


async def test_a_restart_keeps_the_ids_and_another_installation_has_its_own(
    database_url: str, pg_server: object, template_database: str
):
    first = await _ids_after_start(database_url)
    restarted = await _ids_after_start(database_url)
    other = await _ids_after_start(_another_database(pg_server, template_database))

    assert restarted == first
    assert sum(a == b for a, b in zip(first, other, strict=True)) == 0
