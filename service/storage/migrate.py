"""Apply the Alembic migrations in migrations/ (the service does this on start)."""

from __future__ import annotations

import psycopg.errors
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import create_engine, pool
from sqlalchemy.exc import DBAPIError

from service import resources
from service.errors import ConfigurationError
from service.storage.db import libpq_url

MIGRATIONS_DIR = resources.folder("migrations")

MIGRATION_LOCK_KEY = 0x6D656D6F72790002
"""pg_advisory_xact_lock key held while migrating ("memory" in ASCII, then 2; the index
refresh's key ends in 1): replicas that start together migrate one after the other."""

EXTENSION_NEEDED = (
    "the database has no pgvector extension and this role may not create it: a superuser "
    "must run `CREATE EXTENSION vector;` in that database once, then migrate again "
    "(docs/howto/deploy.md, 'An ordinary database role')"
)


def alembic_config(url: str) -> Config:
    """Alembic config pointing at migrations/ and `url` (any postgres URL)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    sync_url = libpq_url(url).replace("postgresql://", "postgresql+psycopg://", 1)
    config.set_main_option("sqlalchemy.url", sync_url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at `url` to `revision`.

    Raises:
        ConfigurationError: the role may not create the pgvector extension (a superuser must,
            once) or the tables, or `revision` is no known migration.
    """
    try:
        command.upgrade(alembic_config(url), revision)
    except DBAPIError as exc:
        if _is_extension_denied(exc):
            raise ConfigurationError(EXTENSION_NEEDED) from None
        if isinstance(exc.orig, psycopg.errors.InsufficientPrivilege):
            refused = str(exc.orig).strip().splitlines()[0]
            raise ConfigurationError(
                f"this database role may not create the service's tables ({refused}): make it "
                "the database's owner, or have the owner run `GRANT CREATE ON SCHEMA public TO "
                "<role>;`, then migrate again"
            ) from None
        raise
    except CommandError as exc:
        raise ConfigurationError(f"cannot migrate to {revision!r}: {exc}") from None


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at `url` down to `revision` ("base" = empty).

    Raises:
        ConfigurationError: `revision` is no known migration.
    """
    try:
        command.downgrade(alembic_config(url), revision)
    except CommandError as exc:
        raise ConfigurationError(f"cannot migrate down to {revision!r}: {exc}") from None


def migrate_to(url: str, revision: str) -> str:
    """Upgrade or downgrade the database at `url` to `revision` ("head", "base" or an id such
    as "0012"), whichever way it lies from the database's revision.

    Returns:
        "upgraded", "downgraded" or "unchanged".

    Raises:
        ConfigurationError: `revision` is no known migration.
    """
    script = ScriptDirectory.from_config(alembic_config(url))
    if revision not in ("head", "base"):
        try:
            script.get_revision(revision)
        except CommandError:
            known = ", ".join(reversed([r.revision for r in script.walk_revisions()]))
            raise ConfigurationError(
                f"no migration {revision!r}; the known ones are {known}, base and head"
            ) from None
    current = current_revision(url)
    target = script.get_current_head() if revision == "head" else revision
    if target == "base":
        target = None
    if current == target:
        return "unchanged"
    below_current = (
        {r.revision for r in script.walk_revisions(base="base", head=current)} if current else set()
    )
    if target is None or target in below_current:
        downgrade(url, revision)
        return "downgraded"
    upgrade(url, revision)
    return "upgraded"


def current_revision(url: str) -> str | None:
    """The database's migration revision (None for an empty database)."""
    config = alembic_config(url)
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def _is_extension_denied(exc: DBAPIError) -> bool:
    """True for PostgreSQL's refusal to create an extension for a role that may not."""
    return isinstance(exc.orig, psycopg.errors.InsufficientPrivilege) and "extension" in str(
        exc.orig
    )


def head_revision() -> str | None:
    """The newest migration's revision id (None when there are no migrations)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config).get_current_head()


def is_at_head(url: str) -> bool:
    """True when the database's revision is the newest migration."""
    return current_revision(url) == head_revision()
