"""Core memory profiles (DESIGN §6.1): one text per user and per view of their banks.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "profiles",
        sa.Column("user_id", sa.String(255), nullable=False),
        # which banks it was written from: "private" (Personal + Interaction Patterns) or
        # "shared" (Interaction Patterns only, for collaborative chats)
        sa.Column("view", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("source_ids", pg.ARRAY(pg.UUID(as_uuid=True)), nullable=False),
        sa.Column("memories_version", sa.BigInteger(), nullable=False),
        sa.Column("built_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "view", name="pk_profiles"),
    )
    op.create_index("ix_profiles_source_ids", "profiles", ["source_ids"], postgresql_using="gin")


def downgrade() -> None:
    op.drop_table("profiles")
