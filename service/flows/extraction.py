"""Extraction jobs: a batch of turns → one LLM call → memories, once per turn (DESIGN §5).

A job is anchored on one turn and works on the waiting turns of that turn's chat and sender
(`service/core/batching.py` decides which are due). No database resource is held while the
LLM answers (DESIGN §5.6): a short transaction plans the batch and another reads the
memories shown to the LLM; after the answer, one short write transaction row-locks the
batch's turns and the shown memories, applies each operation only if its memory is still as
it was shown (active, same version) and its turn still waits, and marks the turns done with
the memories they produced. So a forget, an edit, a chat deletion or another job landing
during the call wins: what it changed is never overwritten, a retried or duplicated job
never extracts twice, and a crash leaves nothing partial. Afterwards the chat's rolling
summary may take the batch in (`service/flows/chat_summary.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import unicodedata
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from service import observability
from service.core import (
    batching,
    dedup,
    forget_guard,
    identity,
    limits,
    privacy,
    reconcile,
    safety,
)
from service.core import reminders as reminder_policy
from service.core.extraction import (
    REPAIR_PROMPT,
    Operation,
    OpKind,
    ParsedAnswer,
    TurnText,
    answer_schema,
    build_messages,
    copies_an_example,
    message_ref,
    parse_answer,
)
from service.core.records import (
    Bank,
    Candidate,
    ChatContext,
    Memory,
    Scope,
    SourceKind,
    Status,
    WriteScope,
)
from service.errors import ExtractionOutputInvalid
from service.flows import chat_summary, consolidation, offload, planted_check, versions
from service.flows.runtime import Runtime
from service.flows.turns import batch_policy, chat_from_json, pending_view
from service.llm.client import decode_json_answer
from service.llm.salvage import salvage_truncated
from service.storage import audit, forget_guards, installation, memories, memory_search, turns
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
    rt: Runtime, *, turn_id: int, mode: RunMode = RunMode.FLUSH, ignore_claims: bool = False
) -> ExtractionOutcome:
    """Extract the waiting turns of `turn_id`'s chat and sender that `mode` selects.

    Each batch is planned (and claimed), asked and written in short units of work, none
    open during the LLM call (module docstring); then the chat's rolling summary may take
    the extracted turns in. The whole chat counts as quiet (summary finished for now) when a
    QUIET job finds nobody wrote in the chat since its turn.

    Args:
        ignore_claims: take claimed turns too. A retried job passes it: its first attempt
            may have left its claims behind (the database went away before they could be
            released), and no one else would take those turns before the claims ran out.

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
                up_to=turn_id if mode is RunMode.FLUSH else None,
                unclaimed=not ignore_claims,  # a batch another job is extracting is its own
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
            await turns.claim(session, turn_ids=sorted(chosen), for_s=_claim_s(rt))
        # planned and committed: the LLM call below holds no transaction, lock or connection
        result = await _extract_batch(rt, batch=batch)
        if result is _CLOSED:
            continue  # discarded or extracted by another job meanwhile: its turns are closed
        batches += 1
        extracted += len(batch)
        if result is None:
            failed += len(batch)
            observability.record_extraction("invalid_output")
            continue
        assert isinstance(result, tuple)
        batch_written, folder_id, assistant_owner = result
        written += batch_written
        observability.record_extraction("written" if batch_written else "nothing_new")
        await consolidation.defer_if_near_cap(
            rt,
            user_id=user_id,
            folder_id=folder_id,
            written=batch_written,
            assistant_owner=assistant_owner,
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
            session,
            chat_id=anchor.chat_id,
            user_id=anchor.user_id,
            up_to=turn_id,
            lock=True,
        )
        for turn in waiting:
            await turns.finish(session, turn_id=turn.id, status=TurnStatus.FAILED, error=error)
        if waiting:
            observability.record_extraction("gave_up")
    await chat_summary.drop_uncovered(rt, chat_id=anchor.chat_id)


def _claim_s(rt: Runtime) -> float:
    """How long a planned batch stays claimed: two LLM calls (answer, repair) for each
    attempt (`REASKS_ON_CONFLICT`) and a minute.
    """
    return 2 * (1 + REASKS_ON_CONFLICT) * rt.settings.llm_timeout_s + 60


def _turn_time(turn: Turn) -> datetime | None:
    """The date of the turn's memories (`flows.turns.accept_turn` stores it: the message's
    own time, or when the turn arrived); None only for a turn an older release accepted
    without one, which is then dated when it is extracted.
    """
    occurred = turn.payload.get("occurred_at")
    return datetime.fromisoformat(occurred) if occurred else None


_CLOSED = object()
"""`_extract_batch`: every turn of the batch was closed by someone else during the call."""


async def _extract_batch(
    rt: Runtime, *, batch: Sequence[Turn]
) -> tuple[int, str | None, str | None] | object:
    """Extract one batch and close its turns that still wait.

    Returns:
        (memories written, the chat's folder id, the owner id of the Assistant Memory it
        writes, if any) on success; None when the LLM's answer
        stayed invalid; `_CLOSED` when no turn of the batch waited any more when the answer
        came (its chat or sender was deleted, forget all, or another job extracted it).
    """
    # one chat context per batch (core.batching), so the first turn's rules are every turn's
    chat = chat_from_json(batch[0].payload["chat"])
    scope = privacy.write_scope(chat)
    texts = []
    previous: str | None = None  # the batch's user message before this one (split secrets)
    for turn in batch:
        raw = turn.payload.get("texts") or {}
        history = [(str(r), str(t)) for r, t in raw.get("history") or []]
        earlier = next((t for r, t in reversed(history) if r == "user"), previous)
        user = str(raw.get("user") or "")
        texts.append(
            TurnText(
                user_message=safety.redact_secrets(user, previous=earlier),
                assistant_message=safety.redact_secrets(raw.get("assistant") or "") or None,
                history=safety.redact_conversation(history),
                occurred_at=_turn_time(turn),
            )
        )
        previous = user
    for attempt in range(1 + REASKS_ON_CONFLICT):
        try:
            return await _ask_and_apply(
                rt,
                batch=batch,
                texts=texts,
                chat=chat,
                scope=scope,
                last=attempt == REASKS_ON_CONFLICT,
            )
        except _ChangedMeanwhile as conflict:
            # another chat corrected a memory this answer changes: this transaction was
            # rolled back, and the LLM is asked again with the memory as it is now, so the
            # second correction applies on top of the first instead of being dropped
            log.info(
                "memories %s were replaced by another extraction while the LLM answered; "
                "asking again (attempt %s of %s)",
                conflict.memory_ids,
                attempt + 2,
                1 + REASKS_ON_CONFLICT,
            )
    raise AssertionError("unreachable: the last attempt never raises _ChangedMeanwhile")


REASKS_ON_CONFLICT = 2
"""How often a batch whose UPDATE or DELETE target another extraction replaced meanwhile
(another chat's correction of a shared memory) is asked again (ours: two writers at once
need one, three need two)."""


class _ChangedMeanwhile(Exception):
    """An operation's target was replaced by another extraction while the LLM answered."""

    def __init__(self, memory_ids: list[uuid.UUID]) -> None:
        super().__init__(f"changed meanwhile: {memory_ids}")
        self.memory_ids = memory_ids


async def _ask_and_apply(
    rt: Runtime,
    *,
    batch: Sequence[Turn],
    texts: list[TurnText],
    chat: ChatContext,
    scope: WriteScope,
    last: bool,
) -> tuple[int, str | None, str | None] | object:
    """One LLM call for the batch and its answer applied (see `_extract_batch`).

    Raises:
        _ChangedMeanwhile: (unless `last`) a target was changed by another writer; nothing
            was written.
    """
    ids = [t.id for t in batch]
    try:
        asked = await _ask(rt, chat=chat, scope=scope, batch=texts)
    except ExtractionOutputInvalid as exc:
        async with rt.db.unit_of_work() as session:
            for turn_id in sorted(await turns.lock_still_queued(session, turn_ids=ids)):
                await turns.finish(
                    session, turn_id=turn_id, status=TurnStatus.FAILED, error=str(exc)
                )
        log.warning("extraction of turns %s failed: %s", ids, exc)
        return None
    except BaseException:
        # the job is retried (LLM unreachable) or stopped: its retry, or another job, takes
        # the batch at once instead of waiting for the claim to run out
        with contextlib.suppress(Exception):
            async with rt.db.unit_of_work() as session:
                await turns.release_claims(session, turn_ids=ids)
        raise
    for refusal in asked.parsed.refused:
        log.warning(
            "extraction refused %s of %s: the LLM was never shown that memory",
            refusal.op.value,
            refusal.ref or "no memory",
        )
    observability.record_dropped_operations("unknown_target", len(asked.parsed.refused))
    for drop in asked.parsed.dropped:
        log.warning("extraction dropped an operation (%s): %s", drop.reason, drop.detail)
        observability.record_dropped_operations(drop.reason)
    for mended in asked.parsed.recovered:
        observability.record_recovered_operation(mended)
    keep = chat_summary.keeps_texts(rt.settings, scope)
    async with rt.db.unit_of_work() as session:
        # lock order of every writer: advisory lock, turn rows, memory rows (by seq)
        await turns.lock_sender(session, user_id=batch[0].user_id)
        still_queued = await turns.lock_still_queued(session, turn_ids=ids)
        if not still_queued:
            log.info("turns %s were closed while the LLM answered; answer dropped", ids)
            observability.record_dropped_operations("turn_closed", len(asked.parsed.operations))
            return _CLOSED
        # what single forgets since these turns were accepted left them (a forget locks
        # the turn rows too, so it came before the lock above or waits for this commit)
        guards = await forget_guards.for_turns(session, turn_ids=sorted(still_queued))
        key = await installation.secret(session, forget_guard.SECRET_NAME) if guards else b""
        states = await memories.lock_rows(session, memory_ids=[m.id for m in asked.refs.values()])
        conflicts = _changed_targets(asked, states)
        if conflicts and not last:
            raise _ChangedMeanwhile(conflicts)  # rolls this unit of work back: nothing written
        if conflicts:
            log.warning(
                "memories %s were replaced by another extraction each time the LLM "
                "answered; the operations on them are dropped after %s attempts",
                conflicts,
                1 + REASKS_ON_CONFLICT,
            )
        per_turn = await _apply_answer(
            rt,
            session,
            asked=asked,
            chat=chat,
            scope=scope,
            states=states,
            open_turns=[t.id in still_queued for t in batch],
            message_ids=[t.user_message_id for t in batch],
            gone=_Gone(
                rt,
                [m for m in asked.refs.values() if _forgotten(m, states)],
                guards=[guards.get(t.id, []) for t in batch],
                key=key,
            ),
        )
        for turn, count in zip(batch, per_turn, strict=True):
            if turn.id in still_queued:
                await turns.finish(
                    session,
                    turn_id=turn.id,
                    status=TurnStatus.DONE,
                    memories_written=count,
                    keep_texts=keep,
                )
    assistant = scope.scope_for(Bank.ASSISTANT)
    return sum(per_turn), chat.folder_id, assistant.owner_id if assistant else None


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


@dataclass(frozen=True, slots=True)
class _Asked:
    """An LLM answer and what it was decided on."""

    parsed: ParsedAnswer  #: the operations kept and the ones refused
    refs: dict[str, Memory]  #: short ref → the memory as it was shown (status, version)
    times: list[datetime]  #: when each message of the batch was written
    message_refs: list[str]  #: "u1", "u2", … of the batch's messages
    texts: list[str]  #: the user messages of the batch (whose-fact checks)
    replies: list[str] = dataclasses.field(default_factory=list)  #: the assistant's replies
    text_vectors: list[np.ndarray] = dataclasses.field(default_factory=list)  #: of `texts`
    reply_vectors: list[np.ndarray] = dataclasses.field(default_factory=list)  #: of `replies`
    earlier: list[str] = dataclasses.field(default_factory=list)  #: the user's earlier lines
    user_name: str | None = None  #: the sender's display name


async def _ask(
    rt: Runtime, *, chat: ChatContext, scope: WriteScope, batch: Sequence[TurnText]
) -> _Asked:
    """The batch's nearest memories (one short read transaction), then one LLM call with
    no database resource held.

    Raises:
        ExtractionOutputInvalid: the answer stayed invalid after the repair retry.
    """
    allowed = [b for b in Bank if scope.scope_for(b)]
    limit = rt.settings.extraction_neighbours
    vectors = await rt.encoder.encode([t.user_message for t in batch], bulk=True)
    async with rt.db.unit_of_work() as session:
        found = [
            await memory_search.search(
                session, scope=scope.as_read_scope(), query_vector=v, limit=limit
            )
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
    parsed = await _ask_for_operations(
        rt, messages, refs=refs, allowed=allowed, message_refs=message_refs, owner=chat.user_id
    )
    kept = await _drop_restated_deletes(rt, parsed.operations, refs=refs)
    kept = await _drop_planted(rt, kept, owner=chat.user_id)
    parsed = dataclasses.replace(parsed, operations=kept)
    replies = [t.assistant_message for t in batch if t.assistant_message]
    # the support check's vectors, made before the write transaction opens
    reply_vectors = list(await rt.encoder.encode(replies)) if replies and kept else []
    return _Asked(
        parsed,
        refs,
        times,
        message_refs,
        [t.user_message for t in batch],
        replies,
        [np.asarray(v) for v in vectors],
        [np.asarray(v) for v in reply_vectors],
        # a name the batch refers back to ("she moved") was written by the user before
        [text for role, text in batch[0].history if role == "user"],
        chat.user_name,
    )


async def _apply_answer(
    rt: Runtime,
    session: AsyncSession,
    *,
    asked: _Asked,
    chat: ChatContext,
    scope: WriteScope,
    states: dict[uuid.UUID, memories.RowState],
    open_turns: Sequence[bool],
    message_ids: Sequence[str],
    gone: _Gone,
) -> list[int]:
    """Apply the answer's operations (inside the write transaction); memories written per
    turn.

    DELETEs come last, so a fact the batch states again (a NEW found to be that memory) is
    known before its DELETE is looked at (`_apply`). Operations of turns closed meanwhile
    are dropped.
    """
    batch_size = len(message_ids)
    written = [0] * batch_size
    restated: dict[uuid.UUID, int] = {}
    ordered = sorted(asked.parsed.operations, key=lambda op: op.op is OpKind.DELETE)
    deleting = frozenset(
        asked.refs[op.ref].id
        for op in ordered
        if op.op is OpKind.DELETE and op.ref is not None and op.ref in asked.refs
    )
    for op in ordered:
        index = asked.message_refs.index(op.message) if op.message else batch_size - 1
        if not open_turns[index]:
            observability.record_dropped_operations("turn_closed")
            continue
        refused = identity.refusal(op.content, user_name=chat.user_name, message=asked.texts[index])
        if refused is not None and op.op is not OpKind.DELETE:
            log.info("extraction proposed a fact that is not the user's (%s); not stored", refused)
            observability.record_dropped_operations("not_the_users")
            continue
        written[index] += await _apply(
            rt,
            session,
            op=op,
            chat=chat,
            scope=scope,
            refs=asked.refs,
            now=asked.times[index],
            message_id=message_ids[index],
            guard=_Guard(states, restated, index, gone, deleting),
            asked=asked,
        )
    return written


def _stored_texts(contents: list[str]) -> list[str]:
    """What `_apply` stores of each text (secrets redacted, NFC), with the rule check it
    asks of each one done too (both cached), so `_apply` finds them ready.
    """
    texts = [unicodedata.normalize("NFC", safety.redact_secrets(c)).strip() for c in contents]
    for text in texts:
        safety.looks_like_instruction(text)
    return texts


async def _drop_planted(rt: Runtime, operations: list[Operation], *, owner: str) -> list[Operation]:
    """The answer without NEW or UPDATE texts that would act as harmful instructions
    (`flows/planted_check.py`; between the LLM call and the write transaction, so a verdict
    asked of the LLM holds no database resource). The text judged is the one `_apply`
    stores, so its embedding is the one `_apply` finds in the encoder's cache. The secret
    scans of up to 120 texts (about a millisecond per 100 characters each) run on the
    sender's lane of the worker pool, never on the loop that serves inlets (issue 26).
    """
    writes = [op for op in operations if op.op in (OpKind.NEW, OpKind.UPDATE) and op.content]
    if not writes:
        return operations
    texts = await offload.in_worker(owner, _stored_texts, [op.content for op in writes])
    verdicts = await planted_check.verdicts(rt, texts)
    dropped = {id(op) for op, v in zip(writes, verdicts, strict=True) if v.refused}
    if dropped:
        log.info("extraction proposed %s planted instructions; not stored", len(dropped))
        observability.record_dropped_operations("planted_instruction", len(dropped))
    return [op for op in operations if id(op) not in dropped]


async def _drop_restated_deletes(
    rt: Runtime, operations: list[Operation], *, refs: dict[str, Memory]
) -> list[Operation]:
    """The answer without DELETEs of memories that its own NEW or UPDATE texts restate (no
    database resource is held: this runs between the LLM call and the write transaction).
    """
    deletes = [
        (op.ref, refs[op.ref].content)
        for op in operations
        if op.op is OpKind.DELETE and op.ref is not None and op.ref in refs
    ]
    texts = [op.content for op in operations if op.op in (OpKind.NEW, OpKind.UPDATE)]
    if not deletes or not texts:
        return operations
    vectors = await rt.encoder.encode([text for _, text in deletes] + texts, bulk=True)
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
        observability.record_dropped_operations("restated", len(dropped))
    return [op for op in operations if not (op.op is OpKind.DELETE and op.ref in dropped)]


def _changed_targets(asked: _Asked, states: dict[uuid.UUID, memories.RowState]) -> list[uuid.UUID]:
    """Targets of the answer's UPDATEs and DELETEs that another extraction replaced by a
    new version since they were shown (another chat's correction of a shared memory).

    A memory forgotten meanwhile is not one (forget wins), nor one a person edited meanwhile
    (the edit is newer than the message: it wins, DESIGN §5.6).
    """
    found = []
    for op in asked.parsed.operations:
        target = asked.refs.get(op.ref or "") if op.op in (OpKind.UPDATE, OpKind.DELETE) else None
        state = states.get(target.id) if target is not None else None
        if target is not None and state is not None and state.status is Status.SUPERSEDED:
            found.append(target.id)
    return list(dict.fromkeys(found))


def _forgotten(memory: Memory, states: dict[uuid.UUID, memories.RowState]) -> bool:
    state = states.get(memory.id)
    return state is None or state.status is Status.DELETED


def _as_shown(memory: Memory, states: dict[uuid.UUID, memories.RowState]) -> bool:
    """Is the memory still in the state the LLM was shown (active, same version)?"""
    state = states.get(memory.id)
    return state is not None and state.status is Status.ACTIVE and state.version == memory.version


class _Gone:
    """Forgotten memories whose text is not written again: the shown ones forgotten while
    the LLM answered, and for each turn of the batch the guards that single forgets since
    it was accepted left it (`core.forget_guard`).
    """

    def __init__(
        self,
        rt: Runtime,
        forgotten: list[Memory],
        *,
        guards: Sequence[Sequence[forget_guards.Guard]] = (),
        key: bytes = b"",
    ) -> None:
        self._rt = rt
        self._forgotten = forgotten
        self._vectors: np.ndarray | None = None
        self._guards = guards
        self._key = key

    async def repeats(self, content: str, vector: np.ndarray, index: int) -> bool:
        """Does `content`, a fact of the batch's message `index`, restate one of them (the
        dedup thresholds)?
        """
        if index < len(self._guards) and any(
            forget_guard.restates(
                content,
                0.0 if guard.vector is None else float(np.dot(vector, guard.vector)),
                guard.fingerprint,
                self._key,
                cosine_threshold=self._rt.settings.dedup_cosine,
            )
            for guard in self._guards[index]
        ):
            return True
        if not self._forgotten:
            return False
        if self._vectors is None:
            # rare (a forget landed during the call), so embedded only then
            self._vectors = np.asarray(
                await self._rt.encoder.encode([m.content for m in self._forgotten])
            )
        pairs = [
            (m, float(np.dot(vector, v)))
            for m, v in zip(self._forgotten, self._vectors, strict=True)
        ]
        found = dedup.find_duplicate(
            content,
            pairs,
            text_threshold=self._rt.settings.dedup_text_ratio,
            cosine_threshold=self._rt.settings.dedup_cosine,
        )
        return found is not None


@dataclass(frozen=True, slots=True)
class _Guard:
    """What `_apply` checks an operation against (DESIGN §5.6)."""

    states: dict[uuid.UUID, memories.RowState]  #: locked rows of the shown memories, now
    restated: dict[uuid.UUID, int]  #: memory → latest message of the batch restating it
    index: int  #: the operation's message in the batch
    gone: _Gone  #: shown memories forgotten meanwhile
    deleting: frozenset[uuid.UUID] = frozenset()  #: memories the answer DELETEs

    def changed(self, target: Memory) -> bool:
        """True (and logged, counted) when `target` is no longer as it was shown."""
        if _as_shown(target, self.states):
            return False
        log.info("memory %s changed while the LLM answered; its operation dropped", target.id)
        observability.record_dropped_operations("target_changed")
        return True

    def applied(self, target: Memory, status: Status) -> None:
        """Our own change of `target`: a later operation on it sees it changed."""
        self.states[target.id] = memories.RowState(status, target.version + 1)


async def _ask_for_operations(
    rt: Runtime,
    messages: list[dict[str, str]],
    *,
    refs: dict[str, Memory],
    allowed: list[Bank],
    message_refs: Sequence[str],
    owner: str,
) -> ParsedAnswer:
    """One LLM call, and one repair retry when the answer is not valid (DESIGN §5.3).

    The answer is asked for with its JSON schema where the endpoint takes one
    (`service/llm/structured.py`), and decoded and validated on a worker thread
    (`flows.offload`, the sender's lane), never on the loop that serves inlets, within the
    caps of `core.limits`. When the retry is cut off too, its complete operations are kept
    (`llm.salvage`): asking a third time would not help a model that runs out of tokens.
    """

    def parse(answer: str, *, salvage: bool = False) -> ParsedAnswer:
        try:
            data = decode_json_answer(answer, max_chars=limits.MAX_ANSWER_CHARS)
        except ExtractionOutputInvalid as exc:
            if not salvage or "truncated" not in str(exc):
                raise
            data = salvage_truncated(answer)
            log.info("extraction answer cut off twice; its complete operations are kept")
            observability.record_recovered_operation("salvaged_truncated")
        return _within_limits(
            parse_answer(
                data,
                refs=refs,
                allowed_banks=allowed,
                message_refs=message_refs,
                max_items=limits.MAX_ANSWER_ITEMS,
            )
        )

    schema = answer_schema(shown_refs=list(refs), message_refs=message_refs, allowed_banks=allowed)
    answer = await rt.llm.complete(messages, json_answer=True, schema=schema)
    try:
        return await offload.in_worker(owner, parse, answer)
    except ExtractionOutputInvalid:
        log.info("extraction answer invalid; retrying once with a repair prompt")
    retry = [
        *messages,
        {"role": "assistant", "content": answer[:4000]},
        {"role": "user", "content": REPAIR_PROMPT},
    ]
    answer = await rt.llm.complete(retry, json_answer=True, schema=schema)
    return await offload.in_worker(owner, parse, answer, salvage=True)


def _within_limits(parsed: ParsedAnswer) -> ParsedAnswer:
    """The operations within `core.limits`; the LLM's excess is dropped and logged."""
    capped = limits.cap_operations(parsed.operations)
    past_cap = capped.past_cap + parsed.unread
    if capped.too_long or past_cap:
        log.warning(
            "extraction answer: dropped %s operations over %s characters and %s operations "
            "past the cap of %s",
            capped.too_long,
            limits.MAX_FACT_CHARS,
            past_cap,
            limits.MAX_OPERATIONS,
        )
        observability.record_dropped_operations("past_cap", past_cap)
    return dataclasses.replace(parsed, operations=capped.kept)


_ACTOR = "extraction"  #: the audit log's actor for everything extraction writes


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
    guard: _Guard,
    asked: _Asked | None = None,
) -> int:
    """Apply one operation if its memory is still as shown; returns 1 when a memory was
    written.

    A DELETE of a memory the batch states again in the same or a later message is dropped
    (the user just said it holds); a NEW or UPDATE restating a shown memory forgotten during
    the call is dropped (forget wins).

    Whatever op the model chose, the texts decide (`core.reconcile`): a fact the batch's
    user messages do not back is dropped; an UPDATE about something else than its target
    is a NEW fact; a fact that restates an active memory merges into it; a NEW fact that
    contradicts an active memory of the same owner supersedes it.
    """
    cell = scope.scope_for(op.bank)
    if cell is None:
        return 0
    if op.op is OpKind.DELETE:
        await _archive(session, refs[op.ref or ""], now=now, guard=guard)
        return 0
    content = _storable_content(op.content)
    if content is None:
        return 0
    target = refs.get(op.ref or "") if op.op is OpKind.UPDATE else None
    if target is not None and guard.changed(target):
        return 0
    vector = await rt.encoder.encode_one(content)
    if not await _still_wanted(rt, content, np.asarray(vector), guard=guard, asked=asked):
        return 0
    if target is not None and not reconcile.on_topic(
        content, target.content, await _cosine(rt, vector, target.content)
    ):
        log.info("an UPDATE of %s is about something else; written as a new fact", target.id)
        observability.record_recovered_operation("update_off_target")
        target = None
    relations = await _relations(rt, session, content, vector, scope=scope, target=target)
    duplicate = next((m for m, r in relations if r is reconcile.Relation.SAME), None)
    if duplicate is not None:
        await _confirm(session, duplicate, chat=chat, now=now, guard=guard)
        return 0
    if target is None:
        target = _contradicted(relations, cell, guard)
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
    await audit.record_created(
        session, new, actor=_ACTOR, reason=f"extracted from chat {chat.chat_id}"
    )
    if target is not None:
        # a shown target is locked and was checked above; a contradicted neighbour is
        # superseded only at the version read (an edit or forget meanwhile wins)
        await versions.supersede(session, old=target, new=new, at=now, actor=_ACTOR)
        guard.applied(target, Status.SUPERSEDED)
    return 1


async def _archive(
    session: AsyncSession, archived: Memory, *, now: datetime, guard: _Guard
) -> None:
    """A DELETE: archive the shown memory unless it changed meanwhile or the batch restates it."""
    if guard.changed(archived):
        return
    if guard.restated.get(archived.id, -1) >= guard.index:
        log.info("DELETE of %s dropped: the same batch states it again", archived.id)
        observability.record_dropped_operations("restated")
        return
    if not await memories.set_status(
        session,
        memory_id=archived.id,
        status=Status.ARCHIVED,
        at=now,
        expected_version=archived.version,
    ):
        return
    guard.applied(archived, Status.ARCHIVED)
    await audit.record(
        session,
        memory_id=archived.id,
        owner_id=archived.owner_id,
        actor=_ACTOR,
        action="archive",
        reason="the user said it is no longer true",
        before=audit.snapshot(archived),
    )


def _storable_content(proposed: str) -> str | None:
    """The fact's text, secrets redacted and NFC-normalised; None (counted) when nothing is
    left, or it reads as an instruction or is mostly redacted.
    """
    content = unicodedata.normalize("NFC", safety.redact_secrets(proposed)).strip()
    if not content or safety.looks_like_instruction(content) or _mostly_redacted(content):
        log.info("extraction proposed an instruction-like or secret-only fact; not stored")
        observability.record_dropped_operations("instruction_like")
        return None
    return content


async def _still_wanted(
    rt: Runtime, content: str, vector: np.ndarray, *, guard: _Guard, asked: _Asked | None
) -> bool:
    """False when the batch's user messages do not back the fact (with the support check on)
    or it restates a memory forgotten during the call (forget wins).
    """
    if asked is not None and rt.settings.extraction_support_check:
        if not _backed(content, vector, asked):
            return False
    if await guard.gone.repeats(content, vector, guard.index):
        log.info("extraction restated a memory forgotten meanwhile; not stored")
        observability.record_dropped_operations("forgotten_content")
        return False
    return True


async def _relations(
    rt: Runtime,
    session: AsyncSession,
    content: str,
    vector: np.ndarray,
    *,
    scope: WriteScope,
    target: Memory | None,
) -> list[tuple[Memory, reconcile.Relation]]:
    """How the fact relates to its 5 nearest active memories in scope (the target left out)."""
    neighbours = await memory_search.search(
        session, scope=scope.as_read_scope(), query_vector=vector, limit=5
    )
    pairs = [(c.memory, c.cosine) for c in neighbours if target is None or c.memory.id != target.id]
    return [
        (
            memory,
            reconcile.relation(
                content,
                memory.content,
                cosine,
                text_threshold=rt.settings.dedup_text_ratio,
                cosine_threshold=rt.settings.dedup_cosine,
            ),
        )
        for memory, cosine in pairs
    ]


async def _confirm(
    session: AsyncSession, duplicate: Memory, *, chat: ChatContext, now: datetime, guard: _Guard
) -> None:
    """Said again: the fact is more certain now (case 11: one row, higher confidence)."""
    guard.restated[duplicate.id] = max(guard.restated.get(duplicate.id, -1), guard.index)
    raised = dedup.confirmed_confidence(duplicate.confidence)
    if raised > duplicate.confidence and await memories.set_confidence(
        session, memory_id=duplicate.id, confidence=raised, at=now
    ):
        await audit.record(
            session,
            memory_id=duplicate.id,
            owner_id=duplicate.owner_id,
            actor=_ACTOR,
            action="confirm",
            reason=f"stated again in chat {chat.chat_id}",
            before={"confidence": duplicate.confidence},
            after={"confidence": raised},
        )


async def _cosine(rt: Runtime, vector: object, text: str) -> float:
    """Cosine of a fact's vector and `text`'s."""
    other = await rt.encoder.encode_one(text)
    return float(np.dot(np.asarray(vector), np.asarray(other)))


def _backed(content: str, vector: np.ndarray, asked: _Asked) -> bool:
    """Do the batch's user messages back `content` (`core.reconcile.supported`)? Counted
    and logged when not.
    """
    if copies_an_example(content, [*asked.texts, *asked.earlier]):
        log.info("extraction proposed a fact of the prompt's examples (from_examples)")
        observability.record_dropped_operations("from_examples")
        return False
    user_cosine = max((float(np.dot(vector, v)) for v in asked.text_vectors), default=0.0)
    reply_cosine = max((float(np.dot(vector, v)) for v in asked.reply_vectors), default=0.0)
    support = reconcile.supported(
        content,
        [*asked.texts, *asked.earlier],
        asked.replies,
        user_cosine=user_cosine,
        assistant_cosine=reply_cosine,
        user_name=asked.user_name,
    )
    if not support.backed:
        log.info("extraction proposed a fact the user's messages do not back (%s)", support.reason)
        observability.record_dropped_operations(support.reason)
    return support.backed


def _contradicted(
    relations: Sequence[tuple[Memory, reconcile.Relation]], cell: Scope, guard: _Guard
) -> Memory | None:
    """The active memory of the same owner that a NEW fact contradicts (it supersedes it),
    or None. A shown memory changed while the LLM answered is left alone.
    """
    for memory, found in relations:
        if found is not reconcile.Relation.CONTRADICTS:
            continue
        if (memory.owner_kind, memory.owner_id) != (cell.owner_kind, cell.owner_id):
            continue
        if memory.id in guard.deleting or (
            memory.id in guard.states and not _as_shown(memory, guard.states)
        ):
            continue  # its own DELETE retires it; or it changed while the LLM answered
        log.info("a NEW fact contradicts memory %s; it supersedes it", memory.id)
        observability.record_recovered_operation("new_supersedes")
        return memory
    return None


def _mostly_redacted(content: str) -> bool:
    """True when little but redactions is left of a fact."""
    return safety.mostly_redacted(content)
