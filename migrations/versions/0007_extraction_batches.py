"""Extraction batches and rolling chat summaries: message hashes and token estimates on
turns, and the table that links each chat's summary to the last message it covers.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("message_hash", sa.String(64), nullable=True))
    op.add_column(
        "turns",
        sa.Column("estimated_tokens", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.create_unique_constraint(
        "uq_turns_chat_id_message_hash", "turns", ["chat_id", "message_hash"]
    )
    op.create_table(
        "chat_summaries",
        sa.Column("chat_id", sa.String(255), nullable=False),
        sa.Column("memory_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("last_message_hash", sa.String(64), nullable=False),
        sa.Column("last_turn_id", sa.BigInteger(), nullable=False),
        sa.Column("turns_covered", sa.Integer(), nullable=False),
        sa.Column("versions", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("chat_id", name="pk_chat_summaries"),
    )


def downgrade() -> None:
    op.drop_table("chat_summaries")
    op.drop_constraint("uq_turns_chat_id_message_hash", "turns", type_="unique")
    op.drop_column("turns", "estimated_tokens")
    op.drop_column("turns", "message_hash")
