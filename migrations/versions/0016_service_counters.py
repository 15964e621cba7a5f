"""Counters shared by every process of an installation: worker outcomes and LLM failures.

Workers serve no HTTP; each process adds what it counted here every few seconds, and every
replica's /metrics and /v1/status read the sums (service/flows/counters.py).

Revision ID: 0016_service_counters
Revises: 0015_forget_guards
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_service_counters"
down_revision = "0015_forget_guards"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "service_counters",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("label", sa.String(64), nullable=False),
        sa.Column("value", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("name", "label", name="pk_service_counters"),
    )


def downgrade() -> None:
    op.drop_table("service_counters")
