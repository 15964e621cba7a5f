"""Memories with vectors and full text, audit events, the turn ledger.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TSV = "to_tsvector('english', content) || to_tsvector('simple', content)"


def upgrade() -> None:
    # Created only when missing: an ordinary role (managed PostgreSQL) may not create it, but
    # migrates once a superuser has (service.storage.migrate names that step when it is not).
    installed = op.get_bind().scalar(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'"))
    if not installed:
        op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "memories",
        sa.Column("id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("owner_kind", sa.String(16), nullable=False),
        sa.Column("owner_id", sa.String(255), nullable=False),
        sa.Column("bank", sa.String(32), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tags", pg.ARRAY(sa.Text()), server_default=sa.text("'{}'"), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("source_kind", sa.String(16), nullable=False),
        sa.Column("source_chat_id", sa.String(255), nullable=True),
        sa.Column("source_message_id", sa.String(255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("superseded_by", pg.UUID(as_uuid=True), nullable=True),
        sa.Column("summary_of", pg.ARRAY(pg.UUID(as_uuid=True)), nullable=True),
        sa.Column("version", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("embedding", Vector(384), nullable=True),
        sa.Column("embedding_model", sa.String(255), nullable=True),
        # Declared with the table: adding a generated column later rewrites every row.
        sa.Column("tsv", pg.TSVECTOR(), sa.Computed(TSV, persisted=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_memories"),
        sa.UniqueConstraint("seq", name="uq_memories_seq"),
    )
    op.create_index(
        "ix_memories_owner_bank_active",
        "memories",
        ["owner_id", "bank"],
        postgresql_where=sa.text("status = 'active'"),
    )
    op.create_index("ix_memories_owner_status", "memories", ["owner_kind", "owner_id", "status"])
    op.create_index("ix_memories_tsv", "memories", ["tsv"], postgresql_using="gin")

    op.create_table(
        "memory_events",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("memory_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("owner_id", sa.String(255), nullable=False),
        sa.Column("actor", sa.String(300), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("before", pg.JSONB(), nullable=True),
        sa.Column("after", pg.JSONB(), nullable=True),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name="pk_memory_events"),
    )
    op.create_index("ix_memory_events_memory_id", "memory_events", ["memory_id"])
    op.create_index("ix_memory_events_owner_id", "memory_events", ["owner_id"])

    op.create_table(
        "turns",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("chat_id", sa.String(255), nullable=False),
        sa.Column("user_message_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("payload", pg.JSONB(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("memories_written", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_turns"),
        sa.UniqueConstraint("chat_id", "user_message_id", name="uq_turns_chat_id_user_message_id"),
    )
    op.create_index("ix_turns_user_id", "turns", ["user_id"])
    op.create_index("ix_turns_status", "turns", ["status"])


def downgrade() -> None:
    op.drop_table("turns")
    op.drop_table("memory_events")
    op.drop_table("memories")
