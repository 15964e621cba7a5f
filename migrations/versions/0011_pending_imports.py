"""Pending imports: what `/memory import` showed its user, until they confirm with the code.

Revision ID: 0011_pending_imports
Revises: 0010_short_id_secret
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011_pending_imports"
down_revision = "0010_short_id_secret"
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
