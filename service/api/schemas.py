"""HTTP request and response bodies, by role (the filter depends on these, not on tables)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from service.core import assistants, limits
from service.core.records import Bank, ChatContext, ChatKind, Memory
from service.core.reminders import Reminder, TriggerKind

MAX_MESSAGE_CHARS = limits.MAX_MESSAGE_CHARS
MAX_MEMORY_CHARS = limits.MAX_FACT_CHARS
ID = Field(min_length=1, max_length=255)
Tag = Annotated[str, Field(min_length=1, max_length=limits.MAX_TAG_CHARS)]


def _utc(value: datetime | None) -> datetime | None:
    """An aware datetime (naive = UTC) in the accepted range (`core.limits.check_date`), or None.

    Raises:
        ValueError: outside 1970-01-01 .. now + 10 years (answered 422 with the range).
    """
    if value is None:
        return None
    return limits.check_date(value, now=datetime.now(UTC))


class ChatContextIn(BaseModel):
    """What the filter knows about the turn (DESIGN §2)."""

    model_config = ConfigDict(extra="forbid")

    user_id: str = ID
    user_name: str | None = Field(default=None, max_length=255)
    chat_id: str = Field(default="", max_length=255)
    kind: ChatKind
    folder_id: str | None = Field(default=None, max_length=255)
    collaborative: bool = False
    collaborative_reason: str | None = Field(default=None, max_length=64)
    read_in_temporary: bool = True
    timezone: str | None = Field(
        default=None,
        max_length=64,
        description="the sender's IANA time zone (Open WebUI's user setting); unknown = UTC",
    )
    assistant_id: str | None = Field(
        default=None,
        max_length=255,
        description="the model's id when an admin gave it its own memory (Assistant Memory): "
        "the chat then reads and writes only the sender's memory for it",
    )
    assistant_name: str | None = Field(default=None, max_length=255)

    @model_validator(mode="after")
    def _assistant_fits(self) -> ChatContextIn:
        if self.assistant_id:
            assistants.owner_id(self.user_id, self.assistant_id)  # ValueError → 422
        return self

    def to_record(self) -> ChatContext:
        """The core record of this chat context (empty folder id read as none)."""
        return ChatContext(
            user_id=self.user_id,
            kind=self.kind,
            chat_id=self.chat_id,
            user_name=self.user_name,
            folder_id=self.folder_id or None,
            collaborative=self.collaborative,
            collaborative_reason=self.collaborative_reason,
            read_in_temporary=self.read_in_temporary,
            timezone=self.timezone,
            assistant_id=self.assistant_id or None,
            assistant_name=self.assistant_name or None,
        )


class ContextRequest(BaseModel):
    """Inlet: which memories should go with this message?"""

    model_config = ConfigDict(extra="forbid")

    chat: ChatContextIn
    message: str = Field(max_length=MAX_MESSAGE_CHARS)
    budget_tokens: int | None = Field(default=None, ge=0, le=8_000)
    now: datetime | None = None
    user_message_id: str | None = Field(
        default=None,
        max_length=255,
        description="id of the user message; a reminder it asks for is set once per id",
    )

    @field_validator("now")
    @classmethod
    def _now_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)


class ContextMemory(BaseModel):
    """One injected memory with the numbers that chose it."""

    id: uuid.UUID
    bank: Bank
    content: str
    similarity: float
    score: float
    created_at: datetime


class ReminderRead(BaseModel):
    """A reminder; `id` is the code users type (`r-k7m2qa`)."""

    id: str
    content: str
    trigger: TriggerKind
    due_at: datetime | None
    all_day: bool
    timezone: str
    cue: str | None
    state: Literal["pending", "fired"]
    created_at: datetime
    fired_at: datetime | None
    source_chat_id: str | None

    @classmethod
    def from_record(cls, r: Reminder) -> ReminderRead:
        """The API view of a stored reminder; `id` is its short code."""
        return cls(
            id=r.code,
            content=r.content,
            trigger=r.trigger,
            due_at=r.due_at,
            all_day=r.all_day,
            timezone=r.timezone,
            cue=r.cue,
            state=r.state.value,  # type: ignore[arg-type]
            created_at=r.created_at,
            fired_at=r.fired_at,
            source_chat_id=r.source_chat_id,
        )


class ReminderList(BaseModel):
    """One page of reminders and how many there are in all."""

    items: list[ReminderRead]
    total: int


class ReminderCreate(BaseModel):
    """A reminder given by its parts: `due_at` (a time) or `cue` (a topic), not both."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, max_length=500)
    due_at: datetime | None = None
    cue: str | None = Field(default=None, min_length=1, max_length=500)
    timezone: str | None = Field(
        default=None, max_length=64, description="IANA zone the reminder is listed in; default UTC"
    )

    @field_validator("due_at")
    @classmethod
    def _due_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)


class ContextResponse(BaseModel):
    """The block to append to the system message, and what is in it."""

    block: str
    memories: list[ContextMemory]
    profile: str | None
    status: str
    reminders: list[ReminderRead] = Field(
        default_factory=list, description="reminders fired by this turn (in the block)"
    )
    notice: str | None = Field(
        default=None,
        description="A line the filter shows the user (a reminder is due, set "
        "or could not be set).",
    )


class HistoryMessage(BaseModel):
    """An earlier message of the chat, given to extraction as context."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS)


class TurnRequest(BaseModel):
    """Outlet: a finished turn to extract memories from."""

    model_config = ConfigDict(extra="forbid")

    chat: ChatContextIn
    user_message_id: str = ID
    user_message: str = Field(max_length=MAX_MESSAGE_CHARS)
    assistant_message: str | None = Field(default=None, max_length=MAX_MESSAGE_CHARS)
    history: list[HistoryMessage] = Field(default_factory=list, max_length=6)
    occurred_at: datetime | None = None
    parent_message_id: str | None = Field(
        default=None,
        max_length=255,
        description="id of the message before the user message in the chat's branch; "
        '"" when it opens the chat; absent when unknown. A later turn with the same parent '
        "is an edit, and the older one's waiting turn is not extracted.",
    )

    @field_validator("occurred_at")
    @classmethod
    def _at_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)


class TurnResponse(BaseModel):
    """What became of a finished turn: queued for extraction, a duplicate, or skipped."""

    status: Literal["queued", "duplicate", "skipped"]
    detail: str
    notice: str | None = Field(
        default=None, description="A line the filter shows the user (e.g. learning is paused)."
    )
    admin_notice: str | None = Field(
        default=None,
        description="A line the filter shows admins only (e.g. no LLM is configured): "
        "ordinary users can do nothing about it.",
    )


class MemoryCreate(BaseModel):
    """A memory written by hand; `bank` defaults to Personal Memory."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, max_length=MAX_MEMORY_CHARS)
    bank: Bank = Bank.PERSONAL
    tags: list[Tag] = Field(default_factory=list, max_length=limits.MAX_TAGS)
    folder_id: str | None = Field(default=None, max_length=255)
    assistant_id: str | None = Field(
        default=None, max_length=255, description="the assistant of an Assistant Memory"
    )


class MemoryUpdate(BaseModel):
    """Changes to a memory; fields left out stay as they are."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = Field(default=None, min_length=1, max_length=MAX_MEMORY_CHARS)
    bank: Bank | None = None
    tags: list[Tag] | None = Field(default=None, max_length=limits.MAX_TAGS)
    version: int | None = Field(
        default=None,
        ge=1,
        description="the version you saw (MemoryRead.version): another one answers 409 with "
        "the current text; without it, an edit made at the same moment is merged with this "
        "one, or 409 when both change the same words",
    )


class MemoryRead(BaseModel):
    """A stored memory as the API shows it."""

    id: uuid.UUID
    owner_kind: str
    owner_id: str
    bank: Bank
    content: str
    tags: list[str]
    confidence: float
    status: str
    source: str
    source_chat_id: str | None
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None
    assistant_id: str | None = None  #: the assistant of an Assistant Memory
    version: int = 1  #: bumped on every change; PATCH's `version` to edit this one only

    @classmethod
    def from_record(cls, m: Memory) -> MemoryRead:
        """The API view of a stored memory; `assistant_id` is set for an Assistant Memory."""
        owner = assistants.parse_owner(m.owner_id) if m.bank is Bank.ASSISTANT else None
        return cls(
            assistant_id=owner[1] if owner else None,
            id=m.id,
            owner_kind=m.owner_kind.value,
            owner_id=m.owner_id,
            bank=m.bank,
            content=m.content,
            tags=list(m.tags),
            confidence=m.confidence,
            status=m.status.value,
            source=m.source_kind.value,
            source_chat_id=m.source_chat_id,
            created_at=m.created_at,
            updated_at=m.updated_at,
            last_used_at=m.last_used_at,
            version=m.version,
        )


class MemoryList(BaseModel):
    """One page of memories and how many match in all."""

    items: list[MemoryRead]
    total: int


class StatusRead(BaseModel):
    """The service's health for `/v1/status`: the LLM, the turn queue and active memories."""

    llm_configured: bool
    turns_queued: int
    turns_done: int
    turns_failed: int
    memories_active: int
    status: str
    #: this service's configuration, for `doctor --service-url` (never a user or password)
    llm_model: str | None = None
    llm_endpoint: str | None = None  #: host:port of LLM_BASE_URL
    database: str | None = None  #: "host:port/database", or the embedded server's folder
    database_pooler: str | None = None  #: MEMORY_DATABASE_POOLER


class CommandRequest(BaseModel):
    """A `/memory …` command typed in a chat."""

    model_config = ConfigDict(extra="forbid")

    chat: ChatContextIn
    command: str = Field(
        min_length=1,
        max_length=MAX_MESSAGE_CHARS,
        description="longer than core.limits.MAX_COMMAND_CHARS: answered with a sentence",
    )
    now: datetime | None = Field(default=None, description="when it was typed; default: now")

    @field_validator("now")
    @classmethod
    def _now_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)


class CommandResponse(BaseModel):
    """The exact text to show, and which command ran ("unknown" for none)."""

    command: str
    text: str
