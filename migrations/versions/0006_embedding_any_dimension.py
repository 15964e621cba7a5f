"""Memory vectors of any dimension, so an embedding model of another size can be swapped in.

`vector(384)` fixed the column to all-MiniLM-L6-v2's size. An untyped `vector` column holds
vectors of any dimension; the service compares only vectors of the loaded model (same
`embedding_model`), clears the others at start and re-embeds them in the background.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE memories ALTER COLUMN embedding TYPE vector")


def downgrade() -> None:
    # Vectors of another size than 384 cannot go back into vector(384): they are dropped and
    # the next start with a 384-dimension model re-embeds those memories.
    op.execute(
        "UPDATE memories SET embedding = NULL, embedding_model = NULL "
        "WHERE embedding IS NOT NULL AND vector_dims(embedding) <> 384"
    )
    op.execute("ALTER TABLE memories ALTER COLUMN embedding TYPE vector(384)")
