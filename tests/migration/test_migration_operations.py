"""Migrating as an admin does it (issue 29 items 1, 2 and 4): replicas started together on an
empty database, an ordinary (non-superuser) role, and going down to an older revision and
up again on a database that holds data."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from typer.testing import CliRunner

from service.cli.main import app
from service.core import commands, reminders
from service.errors import ConfigurationError
from service.flows.ids import install_short_id_key
from service.storage import migrate
from service.storage.db import Database


def _admin(pg_server: object, database: str = "postgres") -> str:
    return str(pg_server.get_uri(database))  # type: ignore[attr-defined]


def _as_role(url: str, role: str) -> str:
    return url.replace("postgresql://postgres:", f"postgresql://{role}:", 1)


@pytest.fixture
def empty_database(pg_server: object) -> Iterator[str]:
    """A database with nothing in it, not even the pgvector extension."""
    name = f"empty_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_admin(pg_server), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield _admin(pg_server, name)
    with psycopg.connect(_admin(pg_server), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def ordinary_role(pg_server: object, empty_database: str) -> Iterator[str]:
    """A login role that owns the empty database and is no superuser (managed PostgreSQL)."""
    role = f"app_{uuid.uuid4().hex[:8]}"
    database = conninfo_to_dict(empty_database)["dbname"]
    with psycopg.connect(_admin(pg_server), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
        conn.execute(f"ALTER DATABASE {database} OWNER TO {role}")
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute(f"ALTER SCHEMA public OWNER TO {role}")
    yield role
    with psycopg.connect(_admin(pg_server), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        conn.execute(f"DROP ROLE IF EXISTS {role}")


# One replica's start: wait for the signal, then migrate (Alembic keeps module-level state,
# so two replicas are two processes, as in production).
_REPLICA = """
import sys, time
from pathlib import Path
from service.storage import migrate
url, go = sys.argv[1], Path(sys.argv[2])
Path(str(go) + "." + sys.argv[3]).touch()
while not go.exists():
    time.sleep(0.005)
migrate.upgrade(url)
"""


def test_two_replicas_migrating_an_empty_database_at_once_both_succeed(
    empty_database: str, tmp_path: Path
):
    go = tmp_path / "go"
    replicas = [
        subprocess.Popen(
            [sys.executable, "-c", _REPLICA, empty_database, str(go), str(n)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    while not all(Path(f"{go}.{n}").exists() for n in range(2)):  # both imported
        if any(r.poll() is not None for r in replicas):
            break
        time.sleep(0.01)
    go.touch()
    errors = [r.communicate(timeout=300)[1] for r in replicas]
    assert [r.returncode for r in replicas] == [0, 0], errors
    assert migrate.is_at_head(empty_database)


def test_an_ordinary_role_is_told_to_have_a_superuser_create_the_extension(
    empty_database: str, ordinary_role: str
):
    url = _as_role(empty_database, ordinary_role)
    with pytest.raises(ConfigurationError) as caught:
        migrate.upgrade(url)
    message = str(caught.value)
    assert "\n" not in message
    assert "superuser must run `CREATE EXTENSION vector;`" in message
    assert caught.value.__cause__ is None  # one sentence, no chained traceback
    assert migrate.current_revision(empty_database) is None  # nothing half-written


def test_the_migrate_command_says_it_in_one_line(
    empty_database: str, ordinary_role: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("DATABASE_URL", _as_role(empty_database, ordinary_role))
    result = CliRunner().invoke(app, ["migrate"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "CREATE EXTENSION vector;" in lines[0]


def test_an_ordinary_role_migrates_once_the_extension_exists(
    empty_database: str, ordinary_role: str
):
    with psycopg.connect(empty_database, autocommit=True) as conn:  # the superuser's one step
        conn.execute("CREATE EXTENSION vector")
    url = _as_role(empty_database, ordinary_role)
    migrate.upgrade(url)
    assert migrate.is_at_head(url)
    with psycopg.connect(url) as conn:
        owner = conn.execute(
            "SELECT tableowner FROM pg_tables WHERE tablename = 'memories'"
        ).fetchone()
    assert owner == (ordinary_role,)


def test_a_role_that_may_not_create_tables_is_told_what_to_grant(
    pg_server: object, empty_database: str
):
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_admin(pg_server), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER")
    try:
        with psycopg.connect(empty_database, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
            conn.execute(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC, {role}")
        with pytest.raises(ConfigurationError) as caught:
            migrate.upgrade(_as_role(empty_database, role))
        assert "\n" not in str(caught.value)
        assert "GRANT CREATE ON SCHEMA public TO <role>;" in str(caught.value)
    finally:
        with psycopg.connect(empty_database, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
        with psycopg.connect(_admin(pg_server), autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def _add_memory(url: str, content: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memories (id, owner_kind, owner_id, bank, content, confidence, status,"
            " source_kind, created_at, updated_at) VALUES (%s, 'user', 'u1', 'personal', %s,"
            " 0.9, 'active', 'chat', now(), now())",
            (uuid.uuid4(), content),
        )


def _memories(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        return [
            (int(r[0]), str(r[1]))
            for r in conn.execute("SELECT seq, content FROM memories ORDER BY seq")
        ]


def test_down_to_an_older_revision_and_up_again_keeps_the_data(database_url: str):
    _add_memory(database_url, "likes green tea")
    before = _memories(database_url)
    assert migrate.migrate_to(database_url, "0008") == "downgraded"
    assert migrate.current_revision(database_url) == "0008"
    assert _memories(database_url) == before
    assert migrate.migrate_to(database_url, "0008") == "unchanged"
    assert migrate.migrate_to(database_url, "head") == "upgraded"
    assert migrate.is_at_head(database_url)
    _add_memory(database_url, "plays the cello")
    assert _memories(database_url)[: len(before)] == before
    # every downgrade() down to the first revision runs on a database with data, and back
    kept = _memories(database_url)
    assert migrate.migrate_to(database_url, "0001") == "downgraded"
    assert _memories(database_url) == kept
    migrate.migrate_to(database_url, "head")
    assert _memories(database_url) == kept


def test_an_unknown_revision_is_refused_with_a_sentence(database_url: str):
    with pytest.raises(ConfigurationError, match="no migration '9999'; the known ones are 0001"):
        migrate.migrate_to(database_url, "9999")
    assert migrate.is_at_head(database_url)


def test_migrate_to_from_the_command_line(database_url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DATABASE_URL", database_url)
    down = CliRunner().invoke(app, ["migrate", "--to", "0012"])
    assert down.exit_code == 0, down.output
    assert "database is at migration 0012 (downgraded)" in down.output
    up = CliRunner().invoke(app, ["migrate"])
    assert up.exit_code == 0, up.output
    assert f"newest migration, {migrate.head_revision()} (upgraded)" in up.output


# The ids the versions before migration 0011 showed: a fixed bijection of the number (their
# service/core/commands.py), written out here so the test pins what users saw.
def _id_before_0011(seq: int) -> str:
    mask = (1 << 30) - 1
    value = ((seq * (0x2C9277B5 & mask | 1)) & mask) ^ (0x1B873593 & mask)
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    return "".join(alphabet[(value >> shift) & 31] for shift in range(25, -1, -5))


def _add_reminder(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO reminders (user_id, content, trigger_kind, timezone, source_key,"
            " created_at) VALUES ('u1', 'call the dentist', 'time', 'UTC', %s, now())"
            " RETURNING id",
            (uuid.uuid4().hex,),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def _installed_ids(url: str, seqs: list[int], reminder: int) -> tuple[list[str], str]:
    db = Database.connect(url, pool_size=1)
    try:
        await install_short_id_key(db)
    finally:
        await db.dispose()
    return [commands.encode_id(s) for s in seqs], reminders.reminder_code(reminder)


async def test_ids_seen_before_an_upgrade_across_0011_stay_the_same(database_url: str):
    """Issue 29 item 4: after an upgrade every short id changed and old ids answered "there
    is no memory"."""
    migrate.migrate_to(database_url, "0010")  # the schema of a version before keyed ids
    for content in ("likes green tea", "plays the cello", "lives in Porto"):
        _add_memory(database_url, content)
    seqs = [seq for seq, _ in _memories(database_url)]
    reminder = _add_reminder(database_url)
    seen = [_id_before_0011(s) for s in seqs]

    migrate.migrate_to(database_url, "head")  # the upgrade
    ids, code = await _installed_ids(database_url, seqs, reminder)
    assert ids == seen
    assert [commands.parse_id(i) for i in seen] == seqs
    assert code == "r-" + _id_before_0011(reminder)
    assert reminders.parse_reminder_code(code) == reminder

    # memories made after the upgrade get keyed ids that collide with none of the old ones
    _add_memory(database_url, "bought a bike")
    new_seq = _memories(database_url)[-1][0]
    new_id = commands.encode_id(new_seq)
    assert new_id not in seen and new_id != _id_before_0011(new_seq)
    assert commands.parse_id(new_id) == new_seq

    # a later re-migration and a restart change nothing
    migrate.migrate_to(database_url, "head")
    assert await _installed_ids(database_url, [*seqs, new_seq], reminder) == (
        [*seen, new_id],
        code,
    )
