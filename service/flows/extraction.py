"""Extraction jobs: a batch of turns → one LLM call → memories, once per turn (DESIGN §5).

A job is anchored on one turn and works on the waiting turns of that turn's chat and sender
(`service/core/batching.py` decides which are due). Each batch is extracted in one unit of
work: its turns are row-locked and marked done in the same transaction as the memories they
produced, so a retried or duplicated job never extracts twice and a crash leaves nothing
partial. Afterwards the chat's rolling summary may take the batch in
(`service/flows/chat_summary.py`).
"""

from __future__ import annotations

import dataclasses
import logging
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from service import observability
from service.core import batching, dedup, identity, limits, privacy, safety
from service.core import reminders as reminder_policy
from service.core.extraction import (
    REPAIR_PROMPT,
    Operation,
    OpKind,
    TurnText,
    build_messages,
    message_ref,
    parse_operations,
)
from service.core.records import (
    Bank,
    Candidate,
    ChatContext,
    Memory,
    SourceKind,
    Status,
    WriteScope,
)
from service.errors import ExtractionOutputInvalid
from service.flows import chat_summary, consolidation
from service.flows.runtime import Runtime
from service.flows.turns import batch_policy, chat_from_json, pending_view
from service.llm.client import decode_json_answer
from service.storage import audit, memories, turns
from service.storage.turns import Turn, TurnStatus

log = logging.getLogger(__name__)


class RunMode(StrEnum):
    """Which of a chat's waiting turns a job extracts."""

    DUE = "due"  #: the batches that are due now (thresholds, "remember that")
    QUIET = "quiet"  #: every waiting turn, if the sender has gone quiet in the chat
    FLUSH = "flush"  #: every waiting turn up to the anchor, now (retries, older jobs)


@dataclass(frozen=True, slots=True)
class ExtractionOutcome:
    """What one extraction job did."""

    status: str  #: "done", "already_done", "not_quiet", "failed"
    written: int = 0  #: memories created or updated
    detail: str = ""  #: one sentence
    user_id: str = ""  #: the turns' sender
    batches: int = 0  #: LLM-extracted batches
    turns: int = 0  #: turns in those batches


async def run_extraction(
    rt: Runtime, *, turn_id: int, mode: RunMode = RunMode.FLUSH
) -> ExtractionOutcome:
    """Extract the waiting turns of `turn_id`'s chat and sender that `mode` selects.

    Every batch runs in its own unit of work; then the chat's rolling summary may take the
    extracted turns in. The whole chat counts as quiet (summary finished for now) when a
    QUIET job finds nobody wrote in the chat since its turn.

    Raises:
        LLMUnavailable: the LLM could not answer (the job is retried with backoff).
        LLMNotConfigured: no LLM is configured (the job waits and is retried).
    """
    quiet_s = rt.settings.batch_quiet_s
    written = batches = extracted = failed = 0
    chat_id = user_id = ""
    folder_id: str | None = None
    chat_quiet = False
    while True:
        async with rt.db.unit_of_work() as session:
            anchor = await turns.get(session, turn_id=turn_id)
            if anchor is None:
                break
            chat_id, user_id = anchor.chat_id, anchor.user_id
            await turns.lock_sender(session, user_id=user_id)
            if mode is RunMode.QUIET and await turns.newer_recent(
                session, chat_id=chat_id, turn_id=turn_id, within_s=quiet_s, user_id=user_id
            ):
                # the newer turn's own quiet check decides
                return ExtractionOutcome(
                    "not_quiet", user_id=user_id, detail="the sender wrote again in this chat"
                )
            if mode is RunMode.QUIET:
                chat_quiet = not await turns.newer_recent(
                    session, chat_id=chat_id, turn_id=turn_id, within_s=quiet_s
                )
            waiting = await turns.pending(
                session,
                chat_id=chat_id,
                user_id=user_id,
                lock=True,
                up_to=turn_id if mode is RunMode.FLUSH else None,
            )
            plan = batching.plan_batches(
                [pending_view(t) for t in waiting],
                batch_policy(rt.settings),
                quiet=mode is not RunMode.DUE,
            )
            if not plan:
                break
            chosen = set(plan[0])
            batch = [t for t in waiting if t.id in chosen]
            result = await _extract_batch(rt, session, batch=batch)
        batches += 1
        extracted += len(batch)
        if result is None:
            failed += len(batch)
            observability.record_extraction("invalid_output")
            continue
        batch_written, folder_id = result
        written += batch_written
        observability.record_extraction("written" if batch_written else "nothing_new")
        await consolidation.defer_if_near_cap(
            rt, user_id=user_id, folder_id=folder_id, written=batch_written
        )
    if chat_id:
        await chat_summary.update(rt, chat_id=chat_id, chat_quiet=chat_quiet)
    if not batches:
        if mode is RunMode.FLUSH:
            observability.record_extraction("already_done")
        return ExtractionOutcome(
            "already_done", user_id=user_id, detail="no turn of this chat was due"
        )
    if failed == extracted:
        return ExtractionOutcome(
            "failed",
            user_id=user_id,
            batches=batches,
            turns=extracted,
            detail="the LLM's answer was not valid, even after repair",
        )
    return ExtractionOutcome(
        "done", written=written, user_id=user_id, batches=batches, turns=extracted
    )


async def mark_turn_failed(rt: Runtime, *, turn_id: int, error: str) -> None:
    """Give up on a job's turns after its last attempt (visible in /v1/status).

    The waiting turns of the anchor's chat and sender up to the anchor are marked failed,
    and message texts the chat's summary was still to take in are erased (the summary
    misses them rather than keep them indefinitely).
    """
    async with rt.db.unit_of_work() as session:
        anchor = await turns.get(session, turn_id=turn_id)
        if anchor is None:
            return
        await turns.lock_sender(session, user_id=anchor.user_id)
        waiting = await turns.pending(
            session, chat_id=anchor.chat_id, user_id=anchor.user_id, up_to=turn_id, lock=True
        )
        for turn in waiting:
            await turns.finish(session, turn_id=turn.id, status=TurnStatus.FAILED, error=error)
        if waiting:
            observability.record_extraction("gave_up")
    await chat_summary.drop_uncovered(rt, chat_id=anchor.chat_id)


def _turn_time(turn: Turn) -> datetime | None:
    occurred = turn.payload.get("occurred_at")
    return datetime.fromisoformat(occurred) if occurred else None


async def _extract_batch(
    rt: Runtime, session: AsyncSession, *, batch: Sequence[Turn]
) -> tuple[int, str | None] | None:
    """Extract one batch and close its turns; None when the LLM's answer stayed invalid.

    Returns:
        (memories written, the chat's folder id) on success.
    """
    # one chat context per batch (core.batching), so the first turn's rules are every turn's
    chat = chat_from_json(batch[0].payload["chat"])
    scope = privacy.write_scope(chat)
    texts = []
    for turn in batch:
        raw = turn.payload.get("texts") or {}
        texts.append(
            TurnText(
                user_message=safety.redact_secrets(raw.get("user") or ""),
                assistant_message=safety.redact_secrets(raw.get("assistant") or "") or None,
                history=[(r, safety.redact_secrets(t)) for r, t in raw.get("history") or []],
                occurred_at=_turn_time(turn),
            )
        )
    try:
        per_turn = await _extract(
            rt,
            session,
            chat=chat,
            scope=scope,
            batch=texts,
            message_ids=[t.user_message_id for t in batch],
        )
    except ExtractionOutputInvalid as exc:
        for turn in batch:
            await turns.finish(session, turn_id=turn.id, status=TurnStatus.FAILED, error=str(exc))
        log.warning("extraction of turns %s failed: %s", [t.id for t in batch], exc)
        return None
    keep = chat_summary.keeps_texts(rt.settings, scope)
    for turn, count in zip(batch, per_turn, strict=True):
        await turns.finish(
            session,
            turn_id=turn.id,
            status=TurnStatus.DONE,
            memories_written=count,
            keep_texts=keep,
        )
    return sum(per_turn), chat.folder_id


def _interleave(lists: Sequence[Sequence[Candidate]], limit: int) -> list[Candidate]:
    """Each message's nearest memories taken in turns (1st of each, then 2nd, …), once each."""
    seen: set[object] = set()
    merged: list[Candidate] = []
    for rank in range(max((len(found) for found in lists), default=0)):
        for found in lists:
            if rank < len(found) and found[rank].memory.id not in seen:
                seen.add(found[rank].memory.id)
                merged.append(found[rank])
    return merged[:limit]


async def _extract(
    rt: Runtime,
    session: AsyncSession,
    *,
    chat: ChatContext,
    scope: WriteScope,
    batch: Sequence[TurnText],
    message_ids: Sequence[str],
) -> list[int]:
    """One LLM call for the batch; returns the memories written per turn."""
    allowed = [b for b in Bank if scope.scope_for(b)]
    limit = rt.settings.extraction_neighbours
    vectors = await rt.encoder.encode([t.user_message for t in batch])
    found = [
        await memories.search(session, scope=scope.as_read_scope(), query_vector=v, limit=limit)
        for v in vectors
    ]
    shown = _interleave(found, limit)
    refs = {f"m{i + 1}": c.memory for i, c in enumerate(shown)}
    fallback = datetime.now(UTC)
    times = [t.occurred_at or fallback for t in batch]
    message_refs = [message_ref(i) for i in range(len(batch))]
    # dates in the prompt are the user's: "tomorrow" on a California evening is their tomorrow
    zone, _ = reminder_policy.resolve_zone(chat.timezone)
    local = [
        dataclasses.replace(t, occurred_at=at.astimezone(zone))
        for t, at in zip(batch, times, strict=True)
    ]
    messages = build_messages(
        turns=local,
        user_name=chat.user_name,
        now=times[-1].astimezone(zone),
        neighbours=list(refs.items()),
        allowed_banks=allowed,
    )
    operations = await _ask_for_operations(
        rt, messages, refs=refs, allowed=allowed, message_refs=message_refs
    )
    operations = await _drop_restated_deletes(rt, operations, refs=refs)
    written = [0] * len(batch)
    for op in operations:
        index = message_refs.index(op.message) if op.message else len(batch) - 1
        refused = identity.refusal(
            op.content, user_name=chat.user_name, message=batch[index].user_message
        )
        if refused is not None and op.op is not OpKind.DELETE:
            log.info("extraction proposed a fact that is not the user's (%s); not stored", refused)
            continue
        written[index] += await _apply(
            rt,
            session,
            op=op,
            chat=chat,
            scope=scope,
            refs=refs,
            now=times[index],
            message_id=message_ids[index],
        )
    return written


async def _drop_restated_deletes(
    rt: Runtime, operations: list[Operation], *, refs: dict[str, Memory]
) -> list[Operation]:
    """The answer without DELETEs of memories that its own NEW or UPDATE texts restate."""
    deletes = [
        (op.ref, refs[op.ref].content)
        for op in operations
        if op.op is OpKind.DELETE and op.ref is not None and op.ref in refs
    ]
    texts = [op.content for op in operations if op.op in (OpKind.NEW, OpKind.UPDATE)]
    if not deletes or not texts:
        return operations
    vectors = await rt.encoder.encode([text for _, text in deletes] + texts)
    pairs = [
        (ref, text, float(np.dot(vectors[i], vectors[len(deletes) + j])))
        for i, (ref, _) in enumerate(deletes)
        for j, text in enumerate(texts)
    ]
    dropped = dedup.restated_deletes(
        deletes,
        pairs,
        text_threshold=rt.settings.dedup_text_ratio,
        cosine_threshold=rt.settings.dedup_cosine,
    )
    if dropped:
        log.info("dropped DELETE of %s: the same answer states the fact again", sorted(dropped))
    return [op for op in operations if not (op.op is OpKind.DELETE and op.ref in dropped)]


async def _ask_for_operations(
    rt: Runtime,
    messages: list[dict[str, str]],
    *,
    refs: dict[str, Memory],
    allowed: list[Bank],
    message_refs: Sequence[str],
) -> list[Operation]:
    """One LLM call, and one repair retry when the answer is not valid (DESIGN §5.3)."""
    answer = await rt.llm.complete(messages, json_answer=True)
    try:
        return _within_limits(
            parse_operations(
                decode_json_answer(answer),
                refs=refs,
                allowed_banks=allowed,
                message_refs=message_refs,
            )
        )
    except ExtractionOutputInvalid:
        log.info("extraction answer invalid; retrying once with a repair prompt")
    retry = [
        *messages,
        {"role": "assistant", "content": answer[:4000]},
        {"role": "user", "content": REPAIR_PROMPT},
    ]
    answer = await rt.llm.complete(retry, json_answer=True)
    return _within_limits(
        parse_operations(
            decode_json_answer(answer), refs=refs, allowed_banks=allowed, message_refs=message_refs
        )
    )


def _within_limits(operations: list[Operation]) -> list[Operation]:
    """The operations within `core.limits`; the LLM's excess is dropped and logged."""
    capped = limits.cap_operations(operations)
    if capped.too_long or capped.past_cap:
        log.warning(
            "extraction answer: dropped %s operations over %s characters and %s operations "
            "past the cap of %s",
            capped.too_long,
            limits.MAX_FACT_CHARS,
            capped.past_cap,
            limits.MAX_OPERATIONS,
        )
    return capped.kept


async def _apply(
    rt: Runtime,
    session: AsyncSession,
    *,
    op: Operation,
    chat: ChatContext,
    scope: WriteScope,
    refs: dict[str, Memory],
    now: datetime,
    message_id: str,
) -> int:
    """Apply one operation; returns 1 when a memory was written."""
    cell = scope.scope_for(op.bank)
    if cell is None:
        return 0
    actor = "extraction"
    if op.op is OpKind.DELETE:
        archived = refs[op.ref or ""]
        await memories.set_status(session, memory_id=archived.id, status=Status.ARCHIVED, at=now)
        await audit.record(
            session,
            memory_id=archived.id,
            owner_id=archived.owner_id,
            actor=actor,
            action="archive",
            reason="the user said it is no longer true",
            before=audit.snapshot(archived),
        )
        return 0
    content = unicodedata.normalize("NFC", safety.redact_secrets(op.content)).strip()
    if not content or safety.looks_like_instruction(content) or _mostly_redacted(content):
        log.info("extraction proposed an instruction-like or secret-only fact; not stored")
        return 0
    vector = await rt.encoder.encode_one(content)
    target = refs.get(op.ref or "") if op.op is OpKind.UPDATE else None
    neighbours = await memories.search(
        session, scope=scope.as_read_scope(), query_vector=vector, limit=5
    )
    pairs = [(c.memory, c.cosine) for c in neighbours if target is None or c.memory.id != target.id]
    duplicate = dedup.find_duplicate(
        content,
        pairs,
        text_threshold=rt.settings.dedup_text_ratio,
        cosine_threshold=rt.settings.dedup_cosine,
    )
    if duplicate is not None:
        # Said again: the fact is more certain now (case 11: one row, higher confidence).
        raised = dedup.confirmed_confidence(duplicate.confidence)
        if raised > duplicate.confidence:
            await memories.set_confidence(
                session, memory_id=duplicate.id, confidence=raised, at=now
            )
            await audit.record(
                session,
                memory_id=duplicate.id,
                owner_id=duplicate.owner_id,
                actor=actor,
                action="confirm",
                reason=f"stated again in chat {chat.chat_id}",
                before={"confidence": duplicate.confidence},
                after={"confidence": raised},
            )
        return 0
    if target is not None and dedup.is_unchanged(content, target.content):
        return 0  # any other difference is a correction, one letter included (DESIGN §5.4)
    new = await memories.insert(
        session,
        owner_kind=cell.owner_kind,
        owner_id=cell.owner_id,
        bank=op.bank,
        content=content,
        tags=op.tags,
        confidence=op.confidence,
        source_kind=SourceKind.INFERENCE if op.inferred else SourceKind.EXTRACTION,
        source_chat_id=chat.chat_id or None,
        source_message_id=message_id,
        created_at=now,
        embedding=np.asarray(vector, dtype=np.float32),
        embedding_model=rt.encoder.model_name,
    )
    await audit.record(
        session,
        memory_id=new.id,
        owner_id=new.owner_id,
        actor=actor,
        action="create",
        reason=f"extracted from chat {chat.chat_id}",
        after=audit.snapshot(new),
    )
    if target is not None:
        await memories.supersede(session, memory_id=target.id, successor_id=new.id, at=now)
        await audit.record(
            session,
            memory_id=target.id,
            owner_id=target.owner_id,
            actor=actor,
            action="supersede",
            reason=f"updated by {new.id}",
            before=audit.snapshot(target),
        )
    return 1


def _mostly_redacted(content: str) -> bool:
    """True when little but redactions is left of a fact."""
    return safety.mostly_redacted(content)
