"""Reminders (prospective memory): due at a time, or when a later message meets a cue.

One row per reminder a user asked for. A reminder fires once: the inlet marks it fired with
`UPDATE … WHERE fired_at IS NULL … RETURNING`, so concurrent inlets cannot both show it.
Cancelling keeps a content-free row, so a regenerated reply cannot set it again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reminders",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("trigger_kind", sa.String(16), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("all_day", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("cue", sa.Text(), nullable=True),
        sa.Column("cue_embedding", Vector(), nullable=True),
        sa.Column("embedding_model", sa.String(255), nullable=True),
        sa.Column("source_chat_id", sa.String(255), nullable=True),
        sa.Column("source_key", sa.String(600), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("fired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("fired_chat_id", sa.String(255), nullable=True),
        sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_reminders"),
        sa.UniqueConstraint("user_id", "source_key", name="uq_reminders_user_id_source_key"),
    )
    op.create_index(
        "ix_reminders_user_id_pending",
        "reminders",
        ["user_id", "trigger_kind"],
        postgresql_where=sa.text("fired_at IS NULL AND cancelled_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("reminders")
