"""Installation secrets: the key of the short-id permutation, one row shared by all replicas.

The row itself is written by the service on first use (service/storage/installation.py), with
a key from Python's `secrets`; a template database cloned for tests or copied between
installations holds no key of its own until then.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "installation_secrets",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("secret", postgresql.BYTEA(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("name", name="pk_installation_secrets"),
    )
    # Memories and reminders made before this revision showed the ids of a fixed bijection
    # of their number; they keep them (service.core.commands.SHORT_ID_LEGACY), so an id seen
    # before the upgrade still finds its memory. Recorded only where there are any.
    for name, table, number in (
        ("short_ids_legacy_memories", "memories", "seq"),
        ("short_ids_legacy_reminders", "reminders", "id"),  # a reminder's code is of its id
    ):
        op.execute(
            f"INSERT INTO installation_secrets (name, secret) SELECT '{name}', "
            f"int8send(max({number})) FROM {table} HAVING max({number}) IS NOT NULL"
        )


def downgrade() -> None:
    op.drop_table("installation_secrets")
