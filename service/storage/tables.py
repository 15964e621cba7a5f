"""ORM tables. Migrations in migrations/versions/ create exactly this schema."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, ClassVar

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# 'english' stems English words; 'simple' keeps every word as written, so names, ids and
# text in other languages are still found.
TSV_EXPRESSION = "to_tsvector('english', content) || to_tsvector('simple', content)"


class Base(DeclarativeBase):
    """The declarative base of the service's tables."""

    # Every model here is one declared table, so statements may take `Row.__table__` as one
    # (DeclarativeBase types it as the wider FromClause).
    __table__: ClassVar[Table]

    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class MemoryRow(Base):
    """One memory (DESIGN §4)."""

    __tablename__ = "memories"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    #: insertion order; breaks ties deterministically and gives users short ids
    seq: Mapped[int] = mapped_column(BigInteger, Identity(always=True), unique=True)
    owner_kind: Mapped[str] = mapped_column(String(16))
    owner_id: Mapped[str] = mapped_column(String(255))
    bank: Mapped[str] = mapped_column(String(32))
    content: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=text("'{}'"))
    confidence: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16))
    source_kind: Mapped[str] = mapped_column(String(16))
    source_chat_id: Mapped[str | None] = mapped_column(String(255))
    source_message_id: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    superseded_by: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    summary_of: Mapped[list[uuid.UUID] | None] = mapped_column(ARRAY(UUID(as_uuid=True)))
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    embedding_model: Mapped[str | None] = mapped_column(String(255))
    # deferred: only SQL reads it; never worth sending to the client
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed(TSV_EXPRESSION, persisted=True), deferred=True
    )

    __table_args__ = (
        # Exact per-owner scans (no global HNSW: with pgvector 0.6 a filtered HNSW scan
        # silently returns too few rows; see docs/discussions/retrieval.md). The trailing
        # columns give a cell's core memories (best confidence, then newest) from an ordered
        # scan. Heavy owners also get partial indexes at run time (storage/owner_indexes.py).
        Index(
            "ix_memories_owner_bank_core",
            "owner_id",
            "bank",
            "confidence",
            "created_at",
            "seq",
            postgresql_where=text("status = 'active'"),
        ),
        Index("ix_memories_owner_status", "owner_kind", "owner_id", "status"),
        Index("ix_memories_tsv", "tsv", postgresql_using="gin"),
    )


class MemoryEventRow(Base):
    """Audit trail: one row per change of a memory (who, what, before/after, why)."""

    __tablename__ = "memory_events"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), index=True)
    owner_id: Mapped[str] = mapped_column(String(255), index=True)
    actor: Mapped[str] = mapped_column(String(300))
    action: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class TurnRow(Base):
    """A finished chat turn handed over by the outlet; the idempotency ledger of extraction."""

    __tablename__ = "turns"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    chat_id: Mapped[str] = mapped_column(String(255))
    user_message_id: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[str] = mapped_column(String(255), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    memories_written: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("now()")
    )
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: SHA-256 hex of the user message within its chat (core.batching.message_hash); NULL for
    #: turns accepted before migration 0007
    message_hash: Mapped[str | None] = mapped_column(String(64))
    #: estimated tokens of the user message and reply, with the batching safety margin
    estimated_tokens: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    #: a job is extracting this turn until then (migration 0010); NULL or past = unclaimed
    claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        UniqueConstraint("chat_id", "user_message_id"),
        # the same message handed over under another id is a duplicate, not a new turn
        UniqueConstraint("chat_id", "message_hash"),
        # whose folder it is (storage.turns.folder_private_to_another, migration 0018): the
        # newest turns of one folder without a scan of every turn
        Index(
            "ix_turns_folder",
            # written as PostgreSQL shows it back, so Alembic finds model and database equal
            text("((payload -> 'chat') ->> 'folder_id')"),
            literal_column("id").desc(),
            postgresql_where=text("(payload -> 'chat' ->> 'folder_id') IS NOT NULL"),
        ),
    )


class ChatSummaryRow(Base):
    """Where the rolling summary of one chat stands: its memory and the last message it covers."""

    __tablename__ = "chat_summaries"

    chat_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    #: the current version: a Chat Memory with source_kind 'chat_summary'
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    #: message_hash of the last turn the summary covers
    last_message_hash: Mapped[str] = mapped_column(String(64))
    last_turn_id: Mapped[int] = mapped_column(BigInteger)
    turns_covered: Mapped[int] = mapped_column(Integer)
    versions: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class InstallationSecretRow(Base):
    """Secrets of this installation, made once and shared by every replica (e.g. short ids)."""

    __tablename__ = "installation_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    secret: Mapped[bytes] = mapped_column(BYTEA)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("now()")
    )


class ServiceCounterRow(Base):
    """Counters every process of the installation adds to (migration 0016): what the workers
    did, for the /metrics and /v1/status of any replica (flows/counters.py).
    """

    __tablename__ = "service_counters"

    #: the metric's name without `_total` (observability.SHARED_COUNTERS)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: its one label's value ("" for a counter without labels)
    label: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    #: when the latest of the events counted here happened
    last_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: a sentence about the latest event (the LLM failure's cause); never user content
    detail: Mapped[str | None] = mapped_column(Text)


class UserSettingsRow(Base):
    """Per-user switches set by `/memory pause` and `/memory resume`."""

    __tablename__ = "user_settings"

    user_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    paused: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("now()")
    )


class InjectionRow(Base):
    """The memories injected into the latest turn of one user in one chat (ids and numbers)."""

    __tablename__ = "injections"

    user_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    chat_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    items: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)


class ProfileRow(Base):
    """A core memories profile of one user, written from one view of their banks."""

    __tablename__ = "profiles"

    user_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    view: Mapped[str] = mapped_column(String(16), primary_key=True)
    content: Mapped[str] = mapped_column(Text)
    source_ids: Mapped[list[uuid.UUID]] = mapped_column(ARRAY(UUID(as_uuid=True)))
    memories_version: Mapped[int] = mapped_column(BigInteger)
    built_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_profiles_source_ids", "source_ids", postgresql_using="gin"),)


class ConsolidationRunRow(Base):
    """One summarizer run over one owner (DESIGN §8): what it changed, or why it refused."""

    __tablename__ = "consolidation_runs"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    owner_kind: Mapped[str] = mapped_column(String(16))
    owner_id: Mapped[str] = mapped_column(String(255))
    trigger: Mapped[str] = mapped_column(String(16))  #: daily or limit
    outcome: Mapped[str] = mapped_column(String(16))  #: applied, nothing, refused, failed
    active_before: Mapped[int] = mapped_column(Integer)
    active_after: Mapped[int] = mapped_column(Integer)
    summaries: Mapped[int] = mapped_column(Integer)  #: summaries written
    merged: Mapped[int] = mapped_column(Integer)  #: sources archived into them
    pruned: Mapped[int] = mapped_column(Integer)  #: archived beyond the cap
    detail: Mapped[str | None] = mapped_column(Text)  #: the guard's or the failure's sentence
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_consolidation_runs_owner", "owner_kind", "owner_id", "finished_at"),
    )


class ReminderRow(Base):
    """A reminder one user asked for: due at a time or when a later message meets its cue."""

    __tablename__ = "reminders"

    #: row id; users see it as `r-` + its short code
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(255))
    content: Mapped[str] = mapped_column(Text)  #: "" once cancelled
    trigger_kind: Mapped[str] = mapped_column(String(16))  #: time or context
    due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    all_day: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    timezone: Mapped[str] = mapped_column(String(64))
    cue: Mapped[str | None] = mapped_column(Text)
    cue_embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    embedding_model: Mapped[str | None] = mapped_column(String(255))
    source_chat_id: Mapped[str | None] = mapped_column(String(255))
    #: "<chat id>:<user message id>": a regenerated reply never sets a reminder twice
    source_key: Mapped[str] = mapped_column(String(600))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    fired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    fired_chat_id: Mapped[str | None] = mapped_column(String(255))
    cancelled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        UniqueConstraint("user_id", "source_key"),
        # every inlet of a private chat looks for its sender's pending reminders
        Index(
            "ix_reminders_user_id_pending",
            "user_id",
            "trigger_kind",
            postgresql_where=text("fired_at IS NULL AND cancelled_at IS NULL"),
        ),
    )


class PendingImportRow(Base):
    """A `/memory import` shown to its user and waiting for the confirmation code; one per
    user, replaced by the next preview, deleted when confirmed, expired or the user is.
    """

    __tablename__ = "pending_imports"

    user_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    code: Mapped[str] = mapped_column(String(16))
    items: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RememberRequestRow(Base):
    """A "Remember this" click whose LLM call is running (migration 0013): a forget all, a
    chat or user deletion meanwhile sets `discarded`, and the click then writes nothing.
    """

    __tablename__ = "remember_requests"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(255), index=True)
    chat_id: Mapped[str] = mapped_column(String(255), index=True)
    message_id: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    #: why it must write nothing: "forget_all", "chat_deleted", "user_deleted"; NULL = still wanted
    discarded: Mapped[str | None] = mapped_column(String(32))


class ForgetGuardRow(Base):
    """A forgotten memory's vector and fingerprint (keyed digests, no text) for one turn
    accepted before the forget (migration 0015); deleted when the turn is done or discarded.
    """

    __tablename__ = "forget_guards"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    turn_id: Mapped[int] = mapped_column(
        BigInteger,
        ForeignKey("turns.id", name="fk_forget_guards_turn_id", ondelete="CASCADE"),
        index=True,
    )
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    #: service.core.forget_guard.Fingerprint.to_json
    fingerprint: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("now()")
    )


class ForgottenTextRow(Base):
    """A keyed fingerprint of a memory its user forgot (migration 0016): an HMAC of its
    normalized text, no text; `/memory import openwebui` skips a text that matches one.
    """

    __tablename__ = "forgotten_texts"

    user_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("now()")
    )


class TermCellRow(Base):
    """A change of one bank's full-text statistics, for Okapi BM25: of its active memories
    and of the sum of their distinct lexemes; the bank's figures are the sums of its rows.
    Inserted by the triggers of migration 0014 in the writer's transaction (insert-only, so
    writers never wait for each other); `storage.term_stats.fold` sums them into one row per
    bank, `rebuild` recomputes them.
    """

    __tablename__ = "memory_term_cells"
    __table_args__ = (
        Index(
            "ix_memory_term_cells_cell",
            "owner_kind",
            "owner_id",
            "bank",
            postgresql_include=["docs", "lexemes"],
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    owner_kind: Mapped[str] = mapped_column(String(16))
    owner_id: Mapped[str] = mapped_column(String(255))
    bank: Mapped[str] = mapped_column(String(32))
    docs: Mapped[int] = mapped_column(BigInteger)
    lexemes: Mapped[int] = mapped_column(BigInteger)


class PostingRow(Base):
    """One lexeme of one active memory's tsvector: its positions (tf) and the memory's length
    (dl, distinct lexemes). The primary key's index includes tf and dl, so the read path's
    BM25 is an index-only scan of the query's lexemes (migration 0014).
    """

    __tablename__ = "memory_postings"
    __table_args__ = (
        PrimaryKeyConstraint(
            "owner_kind",
            "owner_id",
            "bank",
            "lexeme",
            "seq",
            name="pk_memory_postings",
            postgresql_include=["tf", "dl"],
        ),
    )

    owner_kind: Mapped[str] = mapped_column(String(16))
    owner_id: Mapped[str] = mapped_column(String(255))
    bank: Mapped[str] = mapped_column(String(32))
    lexeme: Mapped[str] = mapped_column(Text)
    seq: Mapped[int] = mapped_column(BigInteger)
    tf: Mapped[int] = mapped_column(SmallInteger)
    dl: Mapped[int] = mapped_column(SmallInteger)
