"""Apply the Alembic migrations in migrations/ (the service does this on start)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, pool

from service import resources
from service.storage.db import libpq_url

MIGRATIONS_DIR = resources.folder("migrations")


def alembic_config(url: str) -> Config:
    """Alembic config pointing at migrations/ and `url` (any postgres URL)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    sync_url = libpq_url(url).replace("postgresql://", "postgresql+psycopg://", 1)
    config.set_main_option("sqlalchemy.url", sync_url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at `url` to `revision`."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at `url` down to `revision` ("base" = empty)."""
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str | None:
    """The newest migration's revision id (None when there are no migrations)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config).get_current_head()


def is_at_head(url: str) -> bool:
    """True when the database's revision is the newest migration."""
    config = alembic_config(url)
    head = ScriptDirectory.from_config(config).get_current_head()
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision() == head
    finally:
        engine.dispose()
