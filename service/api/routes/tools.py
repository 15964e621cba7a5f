"""The memory tools a tool-calling model calls during a chat (filter/memory_tools.py posts
here): search, add and forget, each with the chat it runs in.
"""

from __future__ import annotations

from datetime import date

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from service.api.deps import RuntimeDep
from service.api.schemas import ChatContextIn
from service.core import commands as text
from service.core import memory_tools as policy
from service.core.limits import MAX_FACT_CHARS
from service.core.records import Bank
from service.flows import chat_owner
from service.flows import memory_tools as flow
from service.flows.memory_tools import Outcome, ToolResult

router = APIRouter(prefix="/v1/tools", tags=["tools"])


class SearchRequest(BaseModel):
    """A search by the model: the chat it answers in and what it looks for."""

    model_config = ConfigDict(extra="forbid")

    chat: ChatContextIn
    query: str = Field(min_length=1, max_length=4_000, description="words or a question")
    limit: int = Field(default=policy.SEARCH_LIMIT, ge=1, le=policy.MAX_SEARCH_LIMIT)


class AddRequest(BaseModel):
    """A fact the model wants kept for the turn's sender."""

    model_config = ConfigDict(extra="forbid")

    chat: ChatContextIn
    # longer than a memory may hold on purpose: the answer says why it was not stored
    content: str = Field(min_length=1, max_length=4 * MAX_FACT_CHARS)
    # a name the model typed: an unknown one is answered (`refused`, with the valid names)
    bank: str | None = Field(
        default=None,
        max_length=64,
        description="personal, interaction_patterns, project, chat or assistant; null or "
        "empty: this chat's default (as `/memory add`)",
    )


class ForgetRequest(BaseModel):
    """A memory the model was asked to forget, by the short id a search showed."""

    model_config = ConfigDict(extra="forbid")

    chat: ChatContextIn
    memory_id: str = Field(min_length=1, max_length=64, description="short id, e.g. `k7m2qa`")


class ToolMemory(BaseModel):
    """A memory an answer names."""

    id: str = Field(description="the short id /memory commands and memory_forget take")
    bank: str
    content: str
    created: date


class ToolResponse(BaseModel):
    """What the tool did; `text` is the sentence the model reads."""

    status: Outcome
    text: str
    memories: list[ToolMemory]


def _response(result: ToolResult) -> ToolResponse:
    return ToolResponse(
        status=result.outcome,
        text=result.text,
        memories=[
            ToolMemory(
                id=text.short_id(m),
                bank=m.bank.value,
                content=m.content,
                created=m.created_at.date(),
            )
            for m in result.memories
        ],
    )


@router.post("/search", response_model=ToolResponse)
async def search(body: SearchRequest, rt: RuntimeDep) -> ToolResponse:
    """The memories this chat may read that match `query`, best first (`found` or `none`);
    `not_allowed` outside a chat (API calls, automations, background tasks); 403 for another
    user's private chat or folder.
    """
    chat = body.chat.to_record()
    await chat_owner.check(rt, chat)
    return _response(await flow.search(rt, chat=chat, query=body.query, limit=body.limit))


@router.post("/add", response_model=ToolResponse)
async def add(body: AddRequest, rt: RuntimeDep) -> ToolResponse:
    """Keep one fact for `chat.user_id` where this chat's extraction may write: `added`,
    `duplicate` (already known), `refused` (an instruction, only a secret, too long) or
    `not_allowed` (a temporary chat, Personal in a shared chat, memory paused); 403 for
    another user's private chat or folder.
    """
    chat = body.chat.to_record()
    await chat_owner.check(rt, chat)
    bank = None
    if body.bank and body.bank.strip():
        try:
            bank = Bank.parse(body.bank)
        except ValueError as exc:
            return _response(ToolResult("refused", policy.unknown_bank_text(str(exc))))
    return _response(await flow.add(rt, chat=chat, content=body.content, bank=bank))


@router.post("/forget", response_model=ToolResponse)
async def forget(body: ForgetRequest, rt: RuntimeDep) -> ToolResponse:
    """Forget one active memory this chat may read and change: `forgotten`, `not_found`
    (not an id, or nothing visible here has it) or `not_allowed` (a temporary chat); 403 for
    another user's private chat or folder.
    """
    chat = body.chat.to_record()
    await chat_owner.check(rt, chat)
    return _response(await flow.forget(rt, chat=chat, memory_id=body.memory_id))
