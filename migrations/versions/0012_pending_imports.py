"""Pending imports: what `/memory import` showed its user, until they confirm with the code.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pending_imports",
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("code", sa.String(16), nullable=False),
        sa.Column("items", postgresql.JSONB(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_id", name="pk_pending_imports"),
    )


def downgrade() -> None:
    op.drop_table("pending_imports")
