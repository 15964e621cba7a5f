"""Consolidation runs: one row per summarizer run and owner (DESIGN §8).

The memories table already links summaries and sources (`summary_of`, `superseded_by`);
this table records each run's outcome, including runs the retirement guard refused.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "consolidation_runs",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("owner_kind", sa.String(16), nullable=False),
        sa.Column("owner_id", sa.String(255), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("active_before", sa.Integer(), nullable=False),
        sa.Column("active_after", sa.Integer(), nullable=False),
        sa.Column("summaries", sa.Integer(), nullable=False),
        sa.Column("merged", sa.Integer(), nullable=False),
        sa.Column("pruned", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_consolidation_runs"),
    )
    op.create_index(
        "ix_consolidation_runs_owner",
        "consolidation_runs",
        ["owner_kind", "owner_id", "finished_at"],
    )


def downgrade() -> None:
    op.drop_table("consolidation_runs")
