"""Extraction job: turn → LLM operations → memories, once per turn (DESIGN §5)."""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from service import observability
from service.core import dedup, privacy, safety
from service.core.extraction import (
    REPAIR_PROMPT,
    Operation,
    OpKind,
    TurnText,
    build_messages,
    parse_operations,
)
from service.core.records import Bank, ChatContext, Memory, SourceKind, Status, WriteScope
from service.errors import ExtractionOutputInvalid
from service.flows import consolidation
from service.flows.runtime import Runtime
from service.flows.turns import chat_from_json
from service.llm.client import decode_json_answer
from service.storage import audit, memories, turns
from service.storage.turns import TurnStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ExtractionOutcome:
    """What one extraction run did."""

    status: str  #: "done", "already_done", "failed"
    written: int = 0  #: memories created or updated
    detail: str = ""  #: one sentence
    user_id: str = ""  #: the turn's sender


async def run_extraction(rt: Runtime, *, turn_id: int) -> ExtractionOutcome:
    """Extract and apply the memories of one turn, exactly once.

    The turn row is locked for the whole run and marked done in the same transaction as the
    memories it produced, so a retried or duplicated job never extracts twice and a crash
    leaves nothing partial.

    Raises:
        LLMUnavailable: the LLM could not answer (the job is retried with backoff).
        LLMNotConfigured: no LLM is configured (the job waits and is retried).
    """
    async with rt.db.unit_of_work() as session:
        turn = await turns.get_for_update(session, turn_id=turn_id)
        if turn is None or turn.status is not TurnStatus.QUEUED:
            observability.record_extraction("already_done")
            return ExtractionOutcome("already_done", detail="turn already processed")
        await turns.lock_sender(session, user_id=turn.user_id)
        chat = chat_from_json(turn.payload["chat"])
        texts = turn.payload.get("texts") or {}
        occurred = turn.payload.get("occurred_at")
        now = datetime.fromisoformat(occurred) if occurred else datetime.now(UTC)
        scope = privacy.write_scope(chat)
        text = TurnText(
            user_message=safety.redact_secrets(texts.get("user") or ""),
            assistant_message=safety.redact_secrets(texts.get("assistant") or "") or None,
            history=[(r, safety.redact_secrets(t)) for r, t in texts.get("history") or []],
        )
        try:
            written = await _extract(rt, session, chat=chat, scope=scope, turn=text, now=now,
                                     message_id=turn.user_message_id)
        except ExtractionOutputInvalid as exc:
            await turns.finish(session, turn_id=turn_id, status=TurnStatus.FAILED, error=str(exc))
            log.warning("extraction of turn %s failed: %s", turn_id, exc)
            observability.record_extraction("invalid_output")
            return ExtractionOutcome("failed", detail=str(exc))
        await turns.finish(session, turn_id=turn_id, status=TurnStatus.DONE,
                           memories_written=written)
    observability.record_extraction("written" if written else "nothing_new")
    await consolidation.defer_if_near_cap(rt, user_id=turn.user_id, folder_id=chat.folder_id,
                                          written=written)
    return ExtractionOutcome("done", written=written, user_id=turn.user_id)


async def mark_turn_failed(rt: Runtime, *, turn_id: int, error: str) -> None:
    """Give up on a turn after its last attempt (visible in /v1/status)."""
    async with rt.db.unit_of_work() as session:
        turn = await turns.get_for_update(session, turn_id=turn_id)
        if turn is not None and turn.status is TurnStatus.QUEUED:
            await turns.finish(session, turn_id=turn_id, status=TurnStatus.FAILED, error=error)
            observability.record_extraction("gave_up")


async def _extract(
    rt: Runtime, session: AsyncSession, *, chat: ChatContext, scope: WriteScope, turn: TurnText,
    now: datetime, message_id: str,
) -> int:
    allowed = [b for b in Bank if scope.scope_for(b)]
    turn_vector = await rt.encoder.encode_one(turn.user_message)
    shown = await memories.search(session, scope=scope.as_read_scope(), query_vector=turn_vector,
                                  limit=rt.settings.extraction_neighbours)
    refs = {f"m{i + 1}": c.memory for i, c in enumerate(shown)}
    messages = build_messages(turn=turn, user_name=chat.user_name, now=now,
                              neighbours=list(refs.items()), allowed_banks=allowed)
    operations = await _ask_for_operations(rt, messages, refs=refs, allowed=allowed)
    written = 0
    for op in operations:
        written += await _apply(rt, session, op=op, chat=chat, scope=scope, refs=refs, now=now,
                                message_id=message_id)
    return written


async def _ask_for_operations(
    rt: Runtime, messages: list[dict[str, str]], *, refs: dict[str, Memory], allowed: list[Bank]
) -> list[Operation]:
    """One LLM call, and one repair retry when the answer is not valid (DESIGN §5.3)."""
    answer = await rt.llm.complete(messages, json_answer=True)
    try:
        return parse_operations(decode_json_answer(answer), refs=refs, allowed_banks=allowed)
    except ExtractionOutputInvalid:
        log.info("extraction answer invalid; retrying once with a repair prompt")
    retry = [*messages, {"role": "assistant", "content": answer[:4000]},
             {"role": "user", "content": REPAIR_PROMPT}]
    answer = await rt.llm.complete(retry, json_answer=True)
    return parse_operations(decode_json_answer(answer), refs=refs, allowed_banks=allowed)


async def _apply(
    rt: Runtime, session: AsyncSession, *, op: Operation, chat: ChatContext, scope: WriteScope,
    refs: dict[str, Memory], now: datetime, message_id: str,
) -> int:
    """Apply one operation; returns 1 when a memory was written."""
    cell = scope.scope_for(op.bank)
    if cell is None:
        return 0
    actor = "extraction"
    if op.op is OpKind.DELETE:
        target = refs[op.ref or ""]
        await memories.set_status(session, memory_id=target.id, status=Status.ARCHIVED, at=now)
        await audit.record(session, memory_id=target.id, owner_id=target.owner_id, actor=actor,
                           action="archive", reason="the user said it is no longer true",
                           before=audit.snapshot(target))
        return 0
    content = unicodedata.normalize("NFC", safety.redact_secrets(op.content)).strip()
    if not content or safety.looks_like_instruction(content) or _mostly_redacted(content):
        log.info("extraction proposed an instruction-like or secret-only fact; not stored")
        return 0
    vector = await rt.encoder.encode_one(content)
    target = refs.get(op.ref or "") if op.op is OpKind.UPDATE else None
    neighbours = await memories.search(session, scope=scope.as_read_scope(),
                                       query_vector=vector, limit=5)
    pairs = [(c.memory, c.cosine) for c in neighbours if target is None or c.memory.id != target.id]
    duplicate = dedup.find_duplicate(content, pairs, text_threshold=rt.settings.dedup_text_ratio,
                                     cosine_threshold=rt.settings.dedup_cosine)
    if duplicate is not None:
        # Said again: the fact is more certain now (case 11: one row, higher confidence).
        raised = dedup.confirmed_confidence(duplicate.confidence)
        if raised > duplicate.confidence:
            await memories.set_confidence(session, memory_id=duplicate.id, confidence=raised,
                                          at=now)
            await audit.record(session, memory_id=duplicate.id, owner_id=duplicate.owner_id,
                               actor=actor, action="confirm",
                               reason=f"stated again in chat {chat.chat_id}",
                               before={"confidence": duplicate.confidence},
                               after={"confidence": raised})
        return 0
    if target is not None and dedup.text_ratio(content, target.content) > rt.settings.dedup_text_ratio:
        return 0
    new = await memories.insert(
        session, owner_kind=cell.owner_kind, owner_id=cell.owner_id, bank=op.bank, content=content,
        tags=op.tags, confidence=op.confidence, source_kind=SourceKind.EXTRACTION,
        source_chat_id=chat.chat_id or None, source_message_id=message_id, created_at=now,
        embedding=np.asarray(vector, dtype=np.float32), embedding_model=rt.encoder.model_name,
    )
    await audit.record(session, memory_id=new.id, owner_id=new.owner_id, actor=actor,
                       action="create", reason=f"extracted from chat {chat.chat_id}",
                       after=audit.snapshot(new))
    if target is not None:
        await memories.supersede(session, memory_id=target.id, successor_id=new.id, at=now)
        await audit.record(session, memory_id=target.id, owner_id=target.owner_id, actor=actor,
                           action="supersede", reason=f"updated by {new.id}",
                           before=audit.snapshot(target))
    return 1



def _mostly_redacted(content: str) -> bool:
    """True when little but redactions is left of a fact."""
    return safety.REDACTED in content and len(content.replace(safety.REDACTED, "").strip()) < 12
