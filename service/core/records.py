"""Domain types shared by every layer: banks, statuses, chat context and memory records."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Bank(StrEnum):
    """Memory banks (DESIGN §3); values are what the database stores."""

    PERSONAL = "personal"  #: identity and private facts of one user
    INTERACTION = "interaction_patterns"  #: how one user likes to be answered and works
    PROJECT = "project"  #: facts about the shared work of one folder
    CHAT = "chat"  #: facts about one conversation only, read only in that chat
    ASSISTANT = "assistant"  #: one user's memory for one assistant, read only in its chats

    @property
    def label(self) -> str:
        """Human name of the bank ("Project Memory"); not `title`, which str already has.
        From its row in core/banks.py.
        """
        from service.core import banks  # the table imports this module

        return banks.spec(self).label

    @property
    def owner_kind(self) -> OwnerKind:
        """Who owns memories of this bank: a user, a folder or a chat (core/banks.py)."""
        from service.core import banks

        return banks.spec(self).owner_kind

    @classmethod
    def parse(cls, text: str) -> Bank:
        """Read a bank from a value, a label or an alias of its row in core/banks.py
        (case-insensitive; "-" and "_" read as spaces).

        Raises:
            ValueError: for an unknown bank name.
        """
        from service.core import banks

        key = text.strip().lower().replace("-", " ").replace("_", " ")
        for row in banks.rows():
            if key in (row.bank.value.replace("_", " "), row.label.lower(), *row.aliases):
                return row.bank
        raise ValueError(f"unknown bank {text!r}; use {banks.names_sentence()}")


class OwnerKind(StrEnum):
    """Who owns a memory."""

    USER = "user"  #: Personal and Interaction Patterns belong to one user
    FOLDER = "folder"  #: Project Memory belongs to one Open WebUI folder
    CHAT = "chat"  #: Chat Memory belongs to one chat (by its id)
    #: Assistant Memory belongs to one user *and* one assistant (core/assistants.py owner_id)
    ASSISTANT = "assistant"


class Status(StrEnum):
    """Lifecycle of a memory (DESIGN §4)."""

    ACTIVE = "active"  #: readable and injectable
    SUPERSEDED = "superseded"  #: replaced by a newer version (history)
    ARCHIVED = "archived"  #: retired, restorable, never injected
    DELETED = "deleted"  #: forgotten: content-free tombstone


class SourceKind(StrEnum):
    """Where a memory came from."""

    EXTRACTION = "extraction"  #: stated by the user in a chat turn, extracted by the LLM
    INFERENCE = "inference"  #: inferred by the LLM from what the user said, not stated
    MANUAL = "manual"  #: added or edited by the user
    SUMMARY = "summary"  #: written by the consolidation summarizer
    CHAT_SUMMARY = "chat_summary"  #: the rolling summary of one chat (Chat Memory)

    @property
    def is_summary(self) -> bool:
        """Written by a summarizer (never merged again, pruned last)."""
        return self in (SourceKind.SUMMARY, SourceKind.CHAT_SUMMARY)


class ChatKind(StrEnum):
    """What kind of turn the filter saw (DESIGN §2)."""

    SAVED = "saved"  #: an ordinary saved chat
    TEMPORARY = "temporary"  #: a temporary (incognito) chat
    CHANNEL = "channel"  #: an @model turn in a channel
    API = "api"  #: an API call without a chat
    AUTOMATED = "automated"  #: automations, sub-agents, timers
    TASK = "task"  #: title, tags, follow-ups and other background tasks


TAGS = ("identity", "preference", "goal", "relationship", "behavior", "possession")
"""Memory categories of the founding design (DESIGN §5; seeds/001)."""


@dataclass(frozen=True, slots=True)
class ChatContext:
    """What the filter knows about the turn; trusted by the service (DESIGN §2)."""

    user_id: str  #: the sender of this turn
    kind: ChatKind  #: saved, temporary, channel, api, automated or task
    chat_id: str = ""  #: "" when there is no chat
    user_name: str | None = None  #: display name, for prompts
    folder_id: str | None = None  #: the chat's folder (project), if any
    collaborative: bool = False  #: several people can see this chat
    collaborative_reason: str | None = None  #: why the filter thinks so
    read_in_temporary: bool = True  #: may a temporary chat read memories
    timezone: str | None = None  #: the sender's IANA time zone ("Europe/Berlin"), if known
    #: the workspace model (assistant) an admin gave its own memory, when the chat is with
    #: one; None = an ordinary model (DESIGN §3, Assistant Memory)
    assistant_id: str | None = None
    assistant_name: str | None = None  #: its display name, for labels


@dataclass(frozen=True, slots=True)
class Scope:
    """One owner-and-bank cell a query may touch."""

    owner_kind: OwnerKind  #: user, folder or chat
    owner_id: str  #: user id, folder id or chat id
    bank: Bank  #: the bank within that owner


@dataclass(frozen=True, slots=True)
class ReadScope:
    """The cells a chat may read; empty = read nothing."""

    scopes: tuple[Scope, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.scopes)

    @property
    def banks(self) -> frozenset[Bank]:
        """Banks present in this scope."""
        return frozenset(s.bank for s in self.scopes)


@dataclass(frozen=True, slots=True)
class WriteScope:
    """Where extraction from this chat may write: bank → owner; empty = write nothing."""

    owners: dict[Bank, Scope] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.owners)

    def scope_for(self, bank: Bank) -> Scope | None:
        """The owner cell for `bank`, or None when this chat may not write it."""
        return self.owners.get(bank)

    def as_read_scope(self) -> ReadScope:
        """The same cells as a read scope (to show extraction its neighbours)."""
        return ReadScope(tuple(self.owners.values()))


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory as it leaves storage (never an ORM object)."""

    id: uuid.UUID  #: primary key
    seq: int  #: insertion order (short id shown to users)
    owner_kind: OwnerKind  #: user, folder or chat (`Bank.owner_kind`)
    owner_id: str  #: user id, folder id or chat id
    bank: Bank  #: Personal, Interaction Patterns, Project Memory or Chat Memory
    content: str  #: the fact, in the user's language; "" for a tombstone
    tags: tuple[str, ...]  #: categories (identity, preference, …)
    confidence: float  #: 0..1: as given by extraction, 1.0 when added by hand
    status: Status  #: active, superseded, archived or deleted
    source_kind: SourceKind  #: extraction, inference, manual, summary or chat summary
    source_chat_id: str | None  #: chat the memory came from
    source_message_id: str | None  #: user message the memory came from
    created_at: datetime  #: when the fact was stated (UTC)
    updated_at: datetime  #: last change (UTC)
    last_used_at: datetime | None  #: last injection into a prompt
    superseded_by: uuid.UUID | None = None  #: newer version, when superseded
    version: int = 1  #: bumped on every change; part of every cache key
    merged_from: int = 0  #: number of memories a summary was merged from (0: not a summary)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory found by search, with its similarity to the query."""

    memory: Memory  #: the memory
    similarity: float  #: relevance in [0, 1]: 1 − cosine_distance / 2 (seeds/001)
    cosine: float  #: raw cosine similarity in [-1, 1]
    vector: Any = None  #: (d,) float32 embedding when loaded, for diversity (MMR)
    #: full-text score when found by keywords: Okapi BM25 on the read path, `ts_rank` in
    #: keyword search (`/memory search`); None when no word matched
    text_rank: float | None = None
    #: how many of the query's lexemes the memory holds (read path); None: none or unknown
    text_terms: int | None = None
    #: Σ idf of the query's lexemes the memory holds (read path); None: none or unknown
    text_idf: float | None = None


@dataclass(frozen=True, slots=True)
class RankedMemory:
    """A memory chosen for injection, with the numbers that chose it."""

    memory: Memory  #: the memory
    similarity: float  #: relevance in [0, 1]
    score: float  #: blended relevance and recency in [0, 1]


class TurnStatus(StrEnum):
    """Where a turn is in the write path (the turn ledger's `status`)."""

    QUEUED = "queued"  #: accepted, waiting for extraction
    DONE = "done"  #: extracted; the texts are erased from the payload
    FAILED = "failed"  #: extraction gave up; visible in /v1/status
    DISCARDED = "discarded"  #: never extracted: its chat or sender was deleted, or forget all


class RequeueResult(StrEnum):
    """What retrying a failed turn did (storage.admin.requeue_failed)."""

    REQUEUED = "requeued"  #: the turn is queued again
    NOT_FOUND = "not_found"  #: no turn with that id
    NOT_FAILED = "not_failed"  #: the turn is queued or done; nothing to retry
    NO_TEXTS = "no_texts"  #: the turn failed but its texts were erased; nothing to extract
