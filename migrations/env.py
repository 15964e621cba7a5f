"""Alembic environment: runs migrations on the URL given by service.storage.migrate."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool, text

from service.storage.migrate import MIGRATION_LOCK_KEY
from service.storage.owner_indexes import is_owner_index
from service.storage.tables import Base

config = context.config
target_metadata = Base.metadata


def _include(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]  # noqa: ARG001 (Alembic's include_object signature)
    # Per-owner indexes are made and dropped at run time, never by a migration.
    return not (type_ == "index" and reflected and name and is_owner_index(name))


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url")
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            compare_type=True,
            include_object=_include,
        )
        with context.begin_transaction():
            # One migrating process at a time: replicas started together on an empty database
            # would otherwise both create alembic_version and insert its row. The lock is
            # taken before Alembic reads the current revision, so the second process waits,
            # then finds the first one's revision and has nothing left to do. Released at
            # commit or rollback (a transaction lock: fine behind a pooler too).
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline SQL generation is not supported; run `python -m service migrate`")
run_migrations_online()
