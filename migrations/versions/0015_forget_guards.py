"""Forget guards: what a forgotten memory leaves for the turns accepted before its forget.

A single forget gives each turn that was still queued (or failed, which an admin may retry)
and could write the memory's bank one row per forgotten version: the version's vector and its
fingerprint (keyed digests, no text; service/core/forget_guard.py). The extraction of that
turn drops a fact restating it (service/flows/extraction.py). A trigger deletes a turn's
guards as soon as the turn is done or discarded, and deleting the turn deletes them too, so
nothing of a forgotten memory outlives the turns that could have written it back (whose texts
are kept as long).

Revision ID: 0015_forget_guards
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

revision = "0015_forget_guards"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "forget_guards",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("turn_id", sa.BigInteger(), nullable=False),
        sa.Column("embedding", Vector(), nullable=True),
        sa.Column("fingerprint", postgresql.JSONB(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name="pk_forget_guards"),
        sa.ForeignKeyConstraint(
            ["turn_id"], ["turns.id"], name="fk_forget_guards_turn_id", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_forget_guards_turn_id", "forget_guards", ["turn_id"])
    op.execute(
        """
        CREATE FUNCTION forget_guards_close() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          DELETE FROM forget_guards WHERE turn_id = NEW.id;
          RETURN NULL;
        END $$;
        CREATE TRIGGER turns_close_forget_guards
          AFTER UPDATE OF status ON turns FOR EACH ROW
          WHEN (NEW.status IN ('done', 'discarded') AND OLD.status IS DISTINCT FROM NEW.status)
          EXECUTE FUNCTION forget_guards_close();
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS turns_close_forget_guards ON turns")
    op.execute("DROP FUNCTION IF EXISTS forget_guards_close()")
    op.drop_index("ix_forget_guards_turn_id", table_name="forget_guards")
    op.drop_table("forget_guards")
