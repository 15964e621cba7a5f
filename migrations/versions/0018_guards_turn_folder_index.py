"""Whose folder it is: an index on the folder each turn was handed over from.

The service refuses a request that names another user's private folder (issue 27, item 4;
`flows/chat_owner.py`), as it refuses another user's private chat. It reads the newest turn
anyone else handed over from that folder; without this index that read scans every turn.
Partial: turns outside a folder (most of them) are not indexed.

Revision ID: 0018_guards_turn_folder_index
Revises: 0017_forgotten_texts
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_guards_turn_folder_index"
down_revision = "0017_forgotten_texts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_turns_folder",
        "turns",
        [sa.text("((payload -> 'chat') ->> 'folder_id')"), sa.literal_column("id").desc()],
        postgresql_where=sa.text("(payload -> 'chat' ->> 'folder_id') IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_turns_folder", table_name="turns")
