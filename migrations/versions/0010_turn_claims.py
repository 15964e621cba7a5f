"""Turn claims: a batch being extracted is claimed until a deadline instead of row-locked.

Extraction holds no lock across its LLM call (DESIGN §5.6). So that two jobs do not send
the same batch to the LLM side by side, the planning transaction sets `claimed_until` on
the batch's turns (the LLM timeout twice, plus a minute); other jobs leave claimed turns to
their claimer. A claim only saves LLM calls: correctness comes from the write transaction,
which applies an answer only to turns still queued. Claims are released when a job fails
and cleared when the service starts (a killed worker's claims would otherwise wait out
their deadline).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("turns", "claimed_until")
