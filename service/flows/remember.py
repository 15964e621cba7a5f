"""The "Remember this" button: store one message's facts for the clicking user, now.

`remember` answers the Action function (filter/memory_action.py) with the one status line
to show (service/core/remember.py words it). The steps:

1. The cells: the clicker's own command rules (`privacy.remember_write_scope`): Personal
   in a private or temporary chat, never Personal in a shared one, only Chat Memory for
   someone else's message.
2. A message whose memories are stored already answers "Already remembered" (a second
   click asks no LLM).
3. The candidates: the LLM's facts (extraction prompt) when one is configured, else the
   message itself; guarded like `/memory add`.
4. One write transaction, after the LLM call (no database resource is held during it):
   the sender's extraction lock and the owners' import locks (so a turn's extraction, an
   import or a second click cannot write the same fact beside it), then the click's row
   (`storage/remember.py`): a forget all, a chat or account deletion during the call marked
   it, and nothing is written. Facts restating a memory the click was shown and that was
   forgotten meanwhile are dropped (forget wins), so is everything when a memory of this
   very message was forgotten since the click. The rest is deduplicated against the cell
   (DESIGN §5.4) and against each other, then written (confidence 1.0, the user asked).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from service.core import banks, dedup, identity, message_time, privacy
from service.core import remember as policy
from service.core.extraction import OpKind, build_messages, parse_operations
from service.core.records import (
    Bank,
    ChatContext,
    ChatKind,
    Memory,
    OwnerKind,
    Scope,
    SourceKind,
    Status,
    WriteScope,
)
from service.core.remember import Outcome, Refusal, Role, Tally
from service.errors import ExtractionOutputInvalid, LLMNotConfigured, LLMUnavailable
from service.flows import planted_check
from service.flows import profile as profile_flow
from service.flows.runtime import Runtime
from service.llm.client import decode_json_answer
from service.storage import audit, memories, memory_search, turns
from service.storage import imports as import_store
from service.storage import remember as store

log = logging.getLogger(__name__)

STALE_AFTER = timedelta(hours=1)
"""A click's row older than this belongs to a call that never ended (the service stopped)."""

_NO_MEMORY_KINDS = (ChatKind.API, ChatKind.AUTOMATED, ChatKind.TASK)


@dataclass(frozen=True, slots=True)
class RememberResult:
    """What a click did: the outcome, the status line, the memories it names."""

    outcome: Outcome
    text: str
    memories: tuple[Memory, ...] = ()


@dataclass(slots=True)
class _Fact:
    bank: Bank
    content: str
    tags: tuple[str, ...]
    vector: np.ndarray = field(repr=False)


async def remember(
    rt: Runtime,
    *,
    chat: ChatContext,
    message_id: str,
    role: Role,
    content: str,
    author_id: str | None,
    context: Sequence[tuple[str, str]] = (),
    occurred_at: datetime | None = None,
) -> RememberResult:
    """Store the facts of one message for the clicking user (`chat.user_id`).

    Args:
        message_id: the clicked message's id (idempotency: its memories carry it).
        role: who wrote it; `author_id` the Open WebUI user whose message or turn it is
            (None when unknown).
        context: earlier (role, text) pairs, oldest first (only the LLM reads them).
        occurred_at: when the message was written: the memories' date when believable, else
            now (`core.message_time.stated_at`).
    """
    if chat.kind in _NO_MEMORY_KINDS or not chat.user_id:
        return RememberResult(Outcome.NOT_ALLOWED, policy.NO_CHAT)
    if policy.is_command_turn(role=role, content=content, context=context):
        # the Remember button shows under /memory answers too (Open WebUI 0.12.4 lists an
        # action under every reply of a model): nothing of a command goes to extraction
        return RememberResult(Outcome.REFUSED, policy.refusal_line(Refusal.COMMAND))
    scope = privacy.remember_write_scope(chat, author_id=author_id)
    if not scope:
        return RememberResult(Outcome.NOT_ALLOWED, policy.NO_BANK)
    cells = scope.as_read_scope()
    async with rt.db.unit_of_work() as session:
        known, _ = await memories.from_message(
            session,
            scope=cells,
            chat_id=chat.chat_id,
            message_id=message_id,
            tag=policy.TAG_REMEMBER,
        )
    if known:
        return RememberResult(Outcome.ALREADY, policy.already_line(known), tuple(known))
    started = datetime.now(UTC)
    async with rt.db.unit_of_work() as session:
        await store.prune(session, older_than=started - STALE_AFTER)
        request_id = await store.start(
            session, user_id=chat.user_id, chat_id=chat.chat_id, message_id=message_id, at=started
        )
    try:
        return await _remember(
            rt,
            chat=chat,
            scope_cells=scope.owners,
            request_id=request_id,
            started=started,
            message_id=message_id,
            role=role,
            content=content,
            context=context,
            at=message_time.stated_at(occurred_at, arrived=started),
        )
    finally:
        async with rt.db.unit_of_work() as session:
            await store.finish(session, request_id=request_id)


async def _remember(
    rt: Runtime,
    *,
    chat: ChatContext,
    scope_cells: dict[Bank, Scope],
    request_id: int,
    started: datetime,
    message_id: str,
    role: Role,
    content: str,
    context: Sequence[tuple[str, str]],
    at: datetime,
) -> RememberResult:
    shown: list[Memory] = []
    proposed: list[tuple[Bank | None, str, tuple[str, ...]]] | None = None
    if rt.llm.configured:
        proposed, shown = await _extract(rt, chat, scope_cells, role, content, context, at)
    facts, refused, not_allowed = _guarded_facts(
        proposed, content=content, role=role, scope_cells=scope_cells
    )
    planned, planted = await _plan(rt, facts)
    refused += planted
    shown_vectors = (
        np.asarray(await rt.encoder.encode([m.content for m in shown])) if shown else None
    )
    async with rt.db.unit_of_work() as session:
        await turns.lock_sender(session, user_id=chat.user_id)
        for owner in sorted({c.owner_id for c in scope_cells.values()}):
            await import_store.lock_owner(session, owner_id=owner)
        discarded = await store.lock(session, request_id=request_id)
        if discarded is not None:
            return RememberResult(Outcome.DISCARDED, policy.discarded_line(discarded))
        cells = privacy_scope(scope_cells).as_read_scope()
        again, forgotten_here = await memories.from_message(
            session,
            scope=cells,
            chat_id=chat.chat_id,
            message_id=message_id,
            tag=policy.TAG_REMEMBER,
            forgotten_since=started,
        )
        if again:  # a second click written while this one waited
            return RememberResult(Outcome.ALREADY, policy.already_line(again), tuple(again))
        if forgotten_here and planned:
            return RememberResult(Outcome.FORGOTTEN, policy.status_line(Tally(forgotten=1))[1])
        states = await memories.lock_rows(session, memory_ids=[m.id for m in shown])
        gone = [
            (m, shown_vectors[i])
            for i, m in enumerate(shown)
            if shown_vectors is not None
            and (m.id not in states or states[m.id].status is Status.DELETED)
        ]
        tally = await _write(
            rt,
            session,
            chat=chat,
            scope_cells=scope_cells,
            planned=planned,
            gone=gone,
            message_id=message_id,
            at=at,
        )
    tally = Tally(
        written=tally.written,
        known=tally.known,
        refused=tuple(refused),
        not_allowed=not_allowed,
        forgotten=tally.forgotten,
    )
    if any(m.owner_kind is OwnerKind.USER for m in tally.written):
        await profile_flow.request_refresh(rt, user_id=chat.user_id)
    outcome, line = policy.status_line(tally)
    return RememberResult(outcome, line, tally.written or tally.known)


def _guarded_facts(
    proposed: list[tuple[Bank | None, str, tuple[str, ...]]] | None,
    *,
    content: str,
    role: Role,
    scope_cells: dict[Bank, Scope],
) -> tuple[list[tuple[Bank, str, tuple[str, ...]]], list[Refusal], int]:
    """The facts the guards let through as (bank, text, tags), the refusals, and how many
    facts named a bank this click may not write. `proposed` None (no LLM, or it failed):
    the message itself is the one fact.
    """
    refused: list[Refusal] = []
    facts: list[tuple[Bank, str, tuple[str, ...]]] = []
    if proposed is None:
        kept = policy.guard(content, role=role)
        bank = policy.default_bank(privacy_scope(scope_cells))
        if isinstance(kept, Refusal):
            refused.append(kept)
        elif bank is not None:
            facts.append((bank, kept, ()))
        return facts, refused, 0
    not_allowed = 0
    for bank_or_none, fact, tags in proposed:
        if bank_or_none is None or bank_or_none not in scope_cells:
            not_allowed += 1
            continue
        # extracted facts already speak of "User"; only the guards apply
        kept = policy.guard(fact, role=Role.ASSISTANT)
        if isinstance(kept, Refusal):
            refused.append(kept)
            continue
        facts.append((bank_or_none, kept, tags))
    return facts, refused, not_allowed


async def _plan(
    rt: Runtime, facts: list[tuple[Bank, str, tuple[str, ...]]]
) -> tuple[list[_Fact], list[Refusal]]:
    """The facts the planted-instruction check lets through, embedded ((d,) float32 each),
    and one INSTRUCTION refusal per fact it refused.
    """
    verdicts = await planted_check.verdicts(rt, [f for _, f, _ in facts])
    refused = [Refusal.INSTRUCTION for v in verdicts if v.refused]
    facts = [f for f, v in zip(facts, verdicts, strict=True) if not v.refused]
    vectors: Any = await rt.encoder.encode([f for _, f, _ in facts]) if facts else []
    planned = [
        _Fact(bank, fact, tags, np.asarray(vectors[i], dtype=np.float32))
        for i, (bank, fact, tags) in enumerate(facts)
    ]
    return planned, refused


def privacy_scope(cells: dict[Bank, Scope]) -> WriteScope:
    """The cells as a WriteScope again."""
    return WriteScope(dict(cells))


async def _extract(
    rt: Runtime,
    chat: ChatContext,
    scope_cells: dict[Bank, Scope],
    role: Role,
    content: str,
    context: Sequence[tuple[str, str]],
    at: datetime,
) -> tuple[list[tuple[Bank | None, str, tuple[str, ...]]] | None, list[Memory]]:
    """The LLM's facts of the message ((bank, text, tags) each; bank None: not one this
    click may write) and the memories it was shown; (None, []) when the LLM fails (the
    message itself is then stored).
    """
    allowed = [b for b in Bank if b in scope_cells]
    vector = await rt.encoder.encode_one(content)
    async with rt.db.unit_of_work() as session:
        near = await memory_search.search(
            session,
            scope=privacy_scope(scope_cells).as_read_scope(),
            query_vector=np.asarray(vector),
            limit=rt.settings.extraction_neighbours,
        )
    shown = [c.memory for c in near]
    refs = {f"m{i + 1}": m for i, m in enumerate(shown)}
    messages = build_messages(
        turns=[policy.turn_text(role=role, content=content, context=context)],
        user_name=chat.user_name,
        now=at,
        neighbours=list(refs.items()),
        allowed_banks=allowed,
    )
    try:
        answer = await rt.llm.complete(messages, json_answer=True)
        # every bank is parsed, so a fact for a bank this click may not write is counted;
        # all but Assistant Memory, whose presence makes the parser put every fact there
        # (core/extraction._parse_bank): it is allowed here only in that assistant's chat
        others: list[Bank] = [
            r.bank for r in banks.rows() if r.bank not in allowed and not r.exclusive
        ]
        operations = parse_operations(
            decode_json_answer(answer), refs=refs, allowed_banks=allowed + others
        )
    except (LLMUnavailable, LLMNotConfigured, ExtractionOutputInvalid) as exc:
        log.info("remember: extraction failed (%s); keeping the message itself", exc)
        return None, []
    facts: list[tuple[Bank | None, str, tuple[str, ...]]] = []
    for op in operations:
        if op.op not in (OpKind.NEW, OpKind.UPDATE) or not op.content:
            continue  # a click adds; it never archives what the user did not name
        if identity.refusal(op.content, user_name=chat.user_name, message=content) is not None:
            continue
        facts.append((op.bank if op.bank in scope_cells else None, op.content, op.tags))
    return facts, shown


async def _write(
    rt: Runtime,
    session: AsyncSession,
    *,
    chat: ChatContext,
    scope_cells: dict[Bank, Scope],
    planned: Sequence[_Fact],
    gone: Sequence[tuple[Memory, np.ndarray]],
    message_id: str,
    at: datetime,
) -> Tally:
    """Deduplicate and write `planned` inside the click's write transaction."""
    written: list[Memory] = []
    known: dict[uuid.UUID, Memory] = {}
    forgotten = 0
    for fact in planned:
        if dedup.find_duplicate(
            fact.content,
            [(m, float(np.dot(fact.vector, v))) for m, v in gone],
            text_threshold=rt.settings.dedup_text_ratio,
            cosine_threshold=rt.settings.dedup_cosine,
        ):
            forgotten += 1  # forgotten while the LLM answered: the forget wins
            continue
        cell = scope_cells[fact.bank]
        near = await memory_search.search(
            session,
            scope=privacy_scope({fact.bank: cell}).as_read_scope(),
            query_vector=fact.vector,
            limit=5,
        )
        pairs = [(c.memory, c.cosine) for c in near]
        pairs += [(m, float(np.dot(fact.vector, _vector(m, planned)))) for m in written]
        duplicate = dedup.find_duplicate(
            fact.content,
            pairs,
            text_threshold=rt.settings.dedup_text_ratio,
            cosine_threshold=rt.settings.dedup_cosine,
        )
        if duplicate is not None:
            known.setdefault(duplicate.id, duplicate)
            continue
        memory = await memories.insert(
            session,
            owner_kind=cell.owner_kind,
            owner_id=cell.owner_id,
            bank=fact.bank,
            content=fact.content,
            tags=[*fact.tags, policy.TAG_REMEMBER],
            confidence=1.0,
            source_kind=SourceKind.MANUAL,  # the user chose to keep it
            source_chat_id=chat.chat_id,
            source_message_id=message_id,
            created_at=at,
            embedding=fact.vector,
            embedding_model=rt.encoder.model_name,
        )
        await audit.record(
            session,
            memory_id=memory.id,
            owner_id=memory.owner_id,
            actor=f"user:{chat.user_id}",
            action="create",
            reason=f"remembered with the Remember button in chat {chat.chat_id}",
            after=audit.snapshot(memory),
        )
        written.append(memory)
    return Tally(written=tuple(written), known=tuple(known.values()), forgotten=forgotten)


def _vector(memory: Memory, planned: Sequence[_Fact]) -> np.ndarray:
    """The vector of a memory written by this click (the plan it came from)."""
    return next(p.vector for p in planned if p.content == memory.content)
