"""The "Remember this" button: the Action function under a message posts it here."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.api.deps import RuntimeDep
from service.api.schemas import MAX_MESSAGE_CHARS, ChatContextIn, _utc
from service.core import commands as text
from service.core.remember import MAX_CONTEXT_MESSAGES, Outcome, Role
from service.flows import chat_owner
from service.flows import remember as remember_flow

router = APIRouter(prefix="/v1/memories", tags=["chat"])


class ContextMessage(BaseModel):
    """An earlier message of the branch, for the LLM to understand the clicked one."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS)


class RememberRequest(BaseModel):
    """One click: the chat (who clicks, where), the message and who wrote it."""

    model_config = ConfigDict(extra="forbid")

    chat: ChatContextIn
    message_id: str = Field(min_length=1, max_length=255, description="the clicked message")
    role: Role = Field(description="who wrote it: user or assistant")
    content: str = Field(max_length=MAX_MESSAGE_CHARS, description="its text")
    author_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="the Open WebUI user whose message (or turn) it is; null = unknown",
    )
    context: list[ContextMessage] = Field(default_factory=list, max_length=MAX_CONTEXT_MESSAGES)
    occurred_at: datetime | None = Field(default=None, description="when it was written")

    @field_validator("occurred_at")
    @classmethod
    def _occurred_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)


class RememberedMemory(BaseModel):
    """A memory the click stored (or found stored)."""

    id: str = Field(description="the short id /memory commands take")
    bank: str
    content: str


class RememberResponse(BaseModel):
    """What the click did; `text` is the status line shown under the message."""

    status: Outcome
    text: str
    memories: list[RememberedMemory]


@router.post("/remember", response_model=RememberResponse)
async def post_remember(body: RememberRequest, rt: RuntimeDep) -> RememberResponse:
    """Store the message's facts for the clicking user (`chat.user_id`), with the rules of
    their own `/memory add`: through extraction when an LLM is configured, else the message
    itself as one memory; guarded and deduplicated, so a second click stores nothing.

    Never an error for what cannot be stored (a duplicate, a secret, an instruction, a bank
    this chat may not write): `status` and `text` say so. 422 with the field for bad input.
    """
    chat = body.chat.to_record()
    await chat_owner.check(rt, chat)  # 403: another user's private chat
    result = await remember_flow.remember(
        rt,
        chat=chat,
        message_id=body.message_id,
        role=body.role,
        content=body.content,
        author_id=body.author_id,
        context=[(m.role, m.content) for m in body.context],
        occurred_at=body.occurred_at,
    )
    return RememberResponse(
        status=result.outcome,
        text=result.text,
        memories=[
            RememberedMemory(id=text.short_id(m), bank=m.bank.value, content=m.content)
            for m in result.memories
        ],
    )
