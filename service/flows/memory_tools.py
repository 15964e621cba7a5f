"""The memory tools of a tool-calling model: search, add and forget one memory, with the
rules of the chat the model answers in (service/core/memory_tools.py).

Each call answers a `ToolResult`: what happened, the sentence the model reads, and the
memories it names. Adding goes the way of every other add: the guards of `/memory add`
(instruction-like text refused, secrets redacted, first person made third), then the dedup
of extraction against the cell, under the owner's import lock (service/flows/imports.py).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import numpy as np

from service.core import commands as text
from service.core import dedup, limits, person, safety
from service.core import memory_tools as policy
from service.core.imports import ImportItem
from service.core.records import Bank, ChatContext, Memory, ReadScope, Scope, SourceKind
from service.errors import InvalidInput, MemoryNotFound
from service.flows import imports as import_flow
from service.flows import memories as memory_flow
from service.flows.runtime import Runtime
from service.storage import memories, memory_search, user_state

Outcome = Literal[
    "found",
    "none",
    "added",
    "duplicate",
    "refused",
    "forgotten",
    "not_found",
    "not_allowed",
]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool call's outcome, the sentence for the model and the memories it names."""

    outcome: Outcome
    text: str
    memories: tuple[Memory, ...] = ()


async def search(rt: Runtime, *, chat: ChatContext, query: str, limit: int) -> ToolResult:
    """The memories of this chat's read scope that best match `query` (`hybrid_search`)."""
    refused = policy.no_memory_here(chat)
    if refused is not None:
        return ToolResult("not_allowed", refused)
    scope = policy.search_scope(chat)
    found = (
        await memory_flow.hybrid_search(rt, scope=scope, text=query, limit=limit) if scope else []
    )
    return ToolResult(
        "found" if found else "none", policy.search_text(chat, query, found), tuple(found)
    )


async def add(rt: Runtime, *, chat: ChatContext, content: str, bank: Bank | None) -> ToolResult:
    """Store one fact the model wrote for the sender, where this chat's extraction may write.

    Never raises for what cannot be stored (too long, an instruction, only a secret, a bank
    this chat may not write, a duplicate): the result says so.
    """
    refused = policy.no_memory_here(chat)
    if refused is not None:
        return ToolResult("not_allowed", refused)
    cell = policy.add_cell(chat, bank)
    if cell is None:
        return ToolResult("not_allowed", policy.add_refused_text(chat, bank))
    async with rt.db.unit_of_work() as session:
        paused = await user_state.is_paused(session, user_id=chat.user_id)
    if paused:
        return ToolResult("not_allowed", policy.PAUSED_TEXT)
    written = person.third_person(unicodedata.normalize("NFC", content).strip())
    if not written:
        return ToolResult("refused", policy.EMPTY_TEXT)
    try:
        limits.check_fact(written)
    except InvalidInput as exc:
        return ToolResult("refused", f"Not remembered: {exc}.")
    guarded = import_flow.guard(written)
    if guarded is None:
        reason = (
            policy.INSTRUCTION_TEXT
            if safety.looks_like_instruction(written)
            else policy.SECRET_TEXT
        )
        return ToolResult("refused", reason)
    now = datetime.now(UTC)
    item = ImportItem(
        bank=cell.bank,
        content=guarded,
        tags=(policy.TAG_TOOL,),
        confidence=policy.CONFIDENCE,
        source_kind=SourceKind.EXTRACTION,
        source_chat_id=chat.chat_id or None,
        source_message_id=None,
        created_at=now,
        updated_at=now,
    )
    report = await import_flow.run(
        rt,
        items=[item],
        cell_for=lambda _item: cell,
        exact=False,
        actor=f"model-tool:{chat.user_id}",
        reason="added by the model with the memory tool",
    )
    if report.added:
        memory = report.added[0]
        return ToolResult("added", policy.added_text(memory), (memory,))
    known = await _stored_twin(rt, cell, guarded)
    return ToolResult("duplicate", policy.duplicate_text(known), (known,) if known else ())


async def _stored_twin(rt: Runtime, cell: Scope, content: str) -> Memory | None:
    """The active memory of `cell` that `content` restates (extraction's dedup), if any."""
    vector = np.asarray(await rt.encoder.encode_one(content), dtype=np.float32)
    async with rt.db.unit_of_work() as session:
        near = await memory_search.search(
            session, scope=ReadScope((cell,)), query_vector=vector, limit=5
        )
    return dedup.find_duplicate(
        content,
        [(c.memory, c.cosine) for c in near],
        text_threshold=rt.settings.dedup_text_ratio,
        cosine_threshold=rt.settings.dedup_cosine,
    )


async def forget(rt: Runtime, *, chat: ChatContext, memory_id: str) -> ToolResult:
    """Forget one active memory the model could find in this chat and this chat may change;
    `memory_id` is its short id as `search` shows it.
    """
    refused = policy.no_memory_here(chat)
    if refused is not None:
        return ToolResult("not_allowed", refused)
    scope = policy.forget_scope(chat)
    if not scope:
        return ToolResult("not_allowed", policy.forget_refused_text(chat))
    seq = text.parse_id(memory_id)
    if seq is None:
        return ToolResult("not_found", policy.not_an_id_text(memory_id))
    async with rt.db.unit_of_work() as session:
        found = await memories.get_by_seq(session, scope=scope, seq=seq)
    if found is None:
        return ToolResult("not_found", policy.not_found_text(chat, memory_id))
    try:
        await memory_flow.forget(
            rt, scope=scope, memory_id=found.id, actor=f"model-tool:{chat.user_id}"
        )
    except MemoryNotFound:  # forgotten meanwhile
        return ToolResult("not_found", policy.not_found_text(chat, memory_id))
    return ToolResult("forgotten", policy.forgotten_text(found), (found,))
