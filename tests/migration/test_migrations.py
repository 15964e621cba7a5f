"""Migrations give exactly the ORM schema, and go down and up again."""

from __future__ import annotations

import psycopg
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, pool

from service.storage import migrate
from service.storage.tables import Base


def _sync_engine(url: str):  # type: ignore[no-untyped-def]
    return create_engine(
        url.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=pool.NullPool
    )


def _include(obj, name, type_, reflected, compare_to) -> bool:  # type: ignore[no-untyped-def]
    # The job queue's tables belong to procrastinate, not to our models.
    return not (type_ == "table" and name and name.startswith("procrastinate"))


def test_head_matches_the_models(database_url: str) -> None:
    engine = _sync_engine(database_url)
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_object": _include, "compare_type": True}
        )
        diff = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert diff == []
    assert migrate.is_at_head(database_url)


def test_downgrade_to_base_and_upgrade_again(database_url: str) -> None:
    migrate.downgrade(database_url, "base")
    with psycopg.connect(database_url) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename <> 'alembic_version'"
        ).fetchall()
    assert tables == []
    migrate.upgrade(database_url)
    assert migrate.is_at_head(database_url)
