"""Remember requests: a "Remember this" click while its LLM call runs.

A forget all, a chat deletion or a user deletion landing during the call marks the row, and
the click then writes nothing (service/flows/remember.py).

Revision ID: 0013_remember
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_remember"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "remember_requests",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("chat_id", sa.String(255), nullable=False),
        sa.Column("message_id", sa.String(255), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("discarded", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_remember_requests"),
    )
    op.create_index("ix_remember_requests_user_id", "remember_requests", ["user_id"])
    op.create_index("ix_remember_requests_chat_id", "remember_requests", ["chat_id"])


def downgrade() -> None:
    op.drop_index("ix_remember_requests_chat_id", table_name="remember_requests")
    op.drop_index("ix_remember_requests_user_id", table_name="remember_requests")
    op.drop_table("remember_requests")
