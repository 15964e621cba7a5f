"""The rolling summary of a long chat, kept as one Chat Memory (policy: core/chat_summary.py).

Extracted turns of a chat keep their texts in the ledger until the summary takes them in.
An update gives the LLM the current summary and only those turns; the new version
supersedes the old one (kept as history, forgotten with it) and the chat's link moves to the
hash of the last message it covers. Only that chat reads it, like any Chat Memory
(DESIGN §3; `service/core/privacy.py`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.core import banks, safety
from service.core import chat_summary as policy
from service.core.records import (
    Bank,
    Memory,
    OwnerKind,
    ReadScope,
    SourceKind,
    Status,
    WriteScope,
)
from service.errors import ChatSummaryInvalid
from service.flows import planted_check, versions
from service.flows.runtime import Runtime
from service.llm.client import decode_json_answer
from service.storage import audit, chat_summaries, memories, turns
from service.storage.turns import Turn

__all__ = ["drop_uncovered", "erase_uncovered", "keeps_texts", "update", "withdraw_for_forgotten"]

log = logging.getLogger(__name__)

ACTOR = "chat-summary"
"""Audit actor of summary versions."""
CONFIDENCE = 0.9
"""Confidence of a summary: written by the LLM from what was said, not stated by the user."""


def keeps_texts(settings: Settings, scope: WriteScope) -> bool:
    """Should extracted turns keep their texts for this chat's summary?

    Only when summaries are on and the chat may write Chat Memory (a saved chat or a
    channel; never temporary chats, API calls or automations).
    """
    return settings.chat_summary_tokens > 0 and scope.scope_for(Bank.CHAT) is not None


def _chat_scope(chat_id: str) -> ReadScope:
    return ReadScope(banks.owner_cells(OwnerKind.CHAT, chat_id))


async def update(rt: Runtime, *, chat_id: str, chat_quiet: bool) -> str:
    """Take the chat's uncovered turns into its summary when `decide_fold` says so.

    No lock or transaction is held while the LLM writes: the turns are read in one short
    transaction and the version is written in another, only if nothing changed meanwhile
    (the same turns still uncovered, the same summary version current). A chat deleted or
    a fact forgotten during the call erased those texts, so the answer is dropped.

    Two jobs of one chat (quiet checks of several turns fire together) must not ask the LLM
    for the same fold: the uncovered turns are claimed for the call (`turns.claim`, released
    afterwards, or expired after twice the LLM timeout), and a job that finds them claimed
    leaves the fold to the job that holds them.

    Returns:
        "folded", "waiting", "dropped", "invalid", "changed" (dropped: the chat changed
        during the call), "busy" (another job is folding these turns) or "nothing" (no
        uncovered turns).

    Raises:
        LLMUnavailable: the LLM could not answer (the job is retried; texts stay).
    """
    async with rt.db.unit_of_work() as session:
        await chat_summaries.lock_chat(session, chat_id=chat_id)
        uncovered = await turns.uncovered(session, chat_id=chat_id)
        if not uncovered:
            return "nothing"
        state = await chat_summaries.get(session, chat_id=chat_id)
        decision = policy.decide_fold(
            uncovered_tokens=sum(t.estimated_tokens for t in uncovered),
            threshold_tokens=rt.settings.chat_summary_tokens,
            has_summary=state is not None,
            chat_quiet=chat_quiet,
        )
        if decision is policy.FoldDecision.WAIT:
            return "waiting"
        if decision is policy.FoldDecision.DROP:
            await turns.erase_texts(session, turn_ids=[t.id for t in uncovered])
            return "dropped"
        ids = [t.id for t in uncovered]
        if await turns.any_claimed(session, turn_ids=ids):
            return "busy"
        await turns.claim(session, turn_ids=ids, for_s=2 * rt.settings.llm_timeout_s + 30)
        previous = None
        if state is not None:
            # forgotten, archived or moved to another bank: start again from what is left
            previous = await memories.get(
                session, scope=_chat_scope(chat_id), memory_id=state.memory_id
            )
    try:
        return await _fold(rt, chat_id=chat_id, state=state, previous=previous, uncovered=uncovered)
    finally:
        async with rt.db.unit_of_work() as session:
            await turns.release_claims(session, turn_ids=ids)


async def _fold(
    rt: Runtime,
    *,
    chat_id: str,
    state: chat_summaries.ChatSummaryState | None,
    previous: Memory | None,
    uncovered: Sequence[Turn],
) -> str:
    """The LLM call of `update` and the write after it (the turns are claimed meanwhile)."""
    ids = [t.id for t in uncovered]
    try:
        text = await _ask_for_summary(rt, previous=previous, uncovered=uncovered)
    except ChatSummaryInvalid as exc:
        log.warning("rolling summary of chat %s not updated: %s", chat_id, exc)
        async with rt.db.unit_of_work() as session:
            await chat_summaries.lock_chat(session, chat_id=chat_id)
            await turns.erase_texts(session, turn_ids=ids)
        return "invalid"
    async with rt.db.unit_of_work() as session:
        await chat_summaries.lock_chat(session, chat_id=chat_id)
        now_uncovered = {t.id for t in await turns.uncovered(session, chat_id=chat_id)}
        now_state = await chat_summaries.get(session, chat_id=chat_id)
        current = None
        if previous is not None:
            states = await memories.lock_rows(session, memory_ids=[previous.id])
            current = states.get(previous.id)
        unchanged = (
            set(ids) <= now_uncovered
            and (now_state.memory_id if now_state else None) == (state.memory_id if state else None)
            and (
                previous is None
                or (
                    current is not None
                    and current.status is Status.ACTIVE
                    and current.version == previous.version
                )
            )
        )
        if not unchanged:
            log.info("chat %s changed while its summary was written; version dropped", chat_id)
            return "changed"
        await _write_version(
            rt, session, chat_id=chat_id, text=text, previous=previous, uncovered=uncovered
        )
        await turns.erase_texts(session, turn_ids=ids)
    return "folded"


async def drop_uncovered(rt: Runtime, *, chat_id: str) -> None:
    """Erase the texts the chat's summary was still to take in (after a job gave up)."""
    async with rt.db.unit_of_work() as session:
        await erase_uncovered(session, chat_ids=[chat_id])


async def withdraw_for_forgotten(
    session: AsyncSession, *, forgotten: Sequence[Memory]
) -> list[uuid.UUID]:
    """What forgetting extracted memories takes from the summaries of their chats.

    In each source chat, the texts the summary had yet to take in are erased (they may hold
    the fact); a summary that already took in a forgotten memory's message goes too, with
    every earlier version (DESIGN §4: forgetting reaches summaries). The next version then
    starts from new messages only.

    Args:
        forgotten: the memories being forgotten (and their earlier versions).

    Returns:
        Ids of summary versions to forget with them.
    """
    by_chat: dict[str, list[str]] = {}
    for memory in forgotten:
        chat_id = memory.source_chat_id
        learned = memory.source_kind in (SourceKind.EXTRACTION, SourceKind.INFERENCE)
        if learned and chat_id:
            by_chat.setdefault(chat_id, []).append(memory.source_message_id or "")
    # once per chat, however many of its memories go (a forget all of thousands)
    withdrawn: list[uuid.UUID] = []
    for chat_id, message_ids in by_chat.items():
        await chat_summaries.lock_chat(session, chat_id=chat_id)
        await turns.erase_texts(
            session, turn_ids=[t.id for t in await turns.uncovered(session, chat_id=chat_id)]
        )
        state = await chat_summaries.get(session, chat_id=chat_id)
        if state is None:
            continue
        source = await turns.first_id_of(session, chat_id=chat_id, user_message_ids=message_ids)
        if source is not None and source <= state.last_turn_id:
            withdrawn += await memories.history_chain(session, memory_id=state.memory_id)
    return list(dict.fromkeys(withdrawn))


async def erase_uncovered(session: AsyncSession, *, chat_ids: Sequence[str]) -> None:
    """Erase the texts the summaries of these chats had yet to take in (the chats are gone)."""
    for chat_id in chat_ids:
        await chat_summaries.lock_chat(session, chat_id=chat_id)
        await turns.erase_texts(
            session, turn_ids=[t.id for t in await turns.uncovered(session, chat_id=chat_id)]
        )


def _time_of(turn: Turn) -> datetime:
    """When the turn's user message was written (or arrived: `flows.turns.accept_turn`); now
    (UTC) for a turn an older release accepted without a time.
    """
    occurred = turn.payload.get("occurred_at")
    return datetime.fromisoformat(occurred) if occurred else datetime.now(UTC)


def _messages(uncovered: Sequence[Turn]) -> list[policy.SummaryMessage]:
    lines: list[policy.SummaryMessage] = []
    for turn in uncovered:
        texts = turn.payload.get("texts") or {}
        speaker = (turn.payload.get("chat") or {}).get("user_name") or "the user"
        at = _time_of(turn)
        lines.append(
            policy.SummaryMessage(speaker, safety.redact_secrets(texts.get("user") or ""), at)
        )
        if texts.get("assistant"):
            lines.append(
                policy.SummaryMessage("assistant", safety.redact_secrets(texts["assistant"]), at)
            )
    return lines


async def _ask_for_summary(
    rt: Runtime, *, previous: Memory | None, uncovered: Sequence[Turn]
) -> str:
    """One LLM call, one repair retry; the text redacted and checked like any memory."""
    max_chars = rt.settings.chat_summary_max_chars
    messages = policy.build_messages(
        previous=previous.content if previous else None,
        messages=_messages(uncovered),
        now=_time_of(uncovered[-1]),
        max_chars=max_chars,
    )
    answer = await rt.llm.complete(messages, json_answer=True)
    try:
        text = policy.parse_summary(decode_json_answer(answer), max_chars=max_chars)
    except ChatSummaryInvalid:
        log.info("summary answer invalid; retrying once with a repair prompt")
        retry = [
            *messages,
            {"role": "assistant", "content": answer[:4000]},
            {"role": "user", "content": policy.REPAIR_PROMPT},
        ]
        answer = await rt.llm.complete(retry, json_answer=True)
        text = policy.parse_summary(decode_json_answer(answer), max_chars=max_chars)
    text = safety.redact_secrets(text)
    if safety.looks_like_instruction(text) or await planted_check.refuses_any_sentence(rt, text):
        raise ChatSummaryInvalid("the summary reads like an instruction to the assistant")
    return text


async def _write_version(
    rt: Runtime,
    session: AsyncSession,
    *,
    chat_id: str,
    text: str,
    previous: Memory | None,
    uncovered: Sequence[Turn],
) -> None:
    """Store the new version, supersede the previous one and move the chat's link."""
    last = uncovered[-1]
    at = _time_of(last)
    vector = await rt.encoder.encode_one(text)
    new = await memories.insert(
        session,
        owner_kind=OwnerKind.CHAT,
        owner_id=chat_id,
        bank=Bank.CHAT,
        content=text,
        tags=(),
        confidence=CONFIDENCE,
        source_kind=SourceKind.CHAT_SUMMARY,
        source_chat_id=chat_id,
        source_message_id=last.user_message_id,
        created_at=at,
        embedding=vector,
        embedding_model=rt.encoder.model_name,
    )
    digest = last.message_hash or ""
    await audit.record_created(
        session,
        new,
        actor=ACTOR,
        reason=f"rolling summary of chat {chat_id} up to message {digest[:12]}",
    )
    if previous is not None:
        await versions.supersede(session, old=previous, new=new, at=at, actor=ACTOR)
    await chat_summaries.save(
        session,
        chat_id=chat_id,
        memory_id=new.id,
        last_message_hash=digest,
        last_turn_id=last.id,
        turns_added=len(uncovered),
        at=datetime.now(UTC),
    )
