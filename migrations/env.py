"""Alembic environment: runs migrations on the URL given by service.storage.migrate."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from service.storage.tables import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url")
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata,
                          compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline SQL generation is not supported; run `python -m service migrate`")
run_migrations_online()
