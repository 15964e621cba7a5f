"""Per-user settings (pause) and the last injection per chat (for `/memory why`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_settings",
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("paused", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("user_id", name="pk_user_settings"),
    )
    op.create_table(
        "injections",
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("chat_id", sa.String(255), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        # memory ids with their numbers only: never content, so forgetting needs no scrub here
        sa.Column("items", pg.JSONB(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "chat_id", name="pk_injections"),
    )


def downgrade() -> None:
    op.drop_table("injections")
    op.drop_table("user_settings")
