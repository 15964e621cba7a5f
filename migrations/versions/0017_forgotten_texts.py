"""Forgotten texts: a keyed fingerprint of each Personal or Interaction Patterns memory its
user forgot, so `/memory import openwebui` does not bring it back unasked (issue 27).

A row holds the user id and an HMAC-SHA-256 (installation secret `forget_guard`) of the
memory's normalized text: no text, no vector; the import compares the digests of the texts
it would write. The user's rows go with their account.

Revision ID: 0017_forgotten_texts
Revises: 0016_service_counters
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_forgotten_texts"
down_revision = "0016_service_counters"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "forgotten_texts",
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("user_id", "digest", name="pk_forgotten_texts"),
    )


def downgrade() -> None:
    op.drop_table("forgotten_texts")
