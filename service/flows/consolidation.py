"""The summarizer (DESIGN §8): plan → LLM summaries → apply, one owner at a time.

For each owner (a user, or a folder) the run reads the owner's active memories, plans merges
and pruning (`core.consolidation.plan_owner`), asks the LLM for one summary per cluster, and
applies it in transactions of at most CHUNK_SIZE retired memories (a
summary always with all its sources), with an audit event per change and a record of the
run. Nothing is written before every LLM answer is in, so an unreachable LLM leaves the
owner exactly as it was; a cluster whose summary stays invalid after one repair request is
left as it was while the rest of the plan applies. Rows changed between planning and
applying (an extraction updated a source meanwhile) are left alone too.

Entry points: the daily periodic job and `summarize` on the CLI (`summarize`), the limit
trigger after an extraction (`defer_if_near_cap` → job → `consolidate`), and `restore`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.core import consolidation as policy
from service.core.commands import counted
from service.core.consolidation import (
    Cluster,
    ClusterStrategy,
    ConsolidationParams,
    OwnerPlan,
    PruneStrategy,
    SummaryDraft,
    Trigger,
)
from service.core.records import Memory, OwnerKind, SourceKind, Status
from service.errors import (
    ExtractionOutputInvalid,
    InvalidInput,
    LLMNotConfigured,
    LLMUnavailable,
    MemoryNotFound,
)
from service.flows import offload, planted_check
from service.flows.runtime import Runtime
from service.llm.client import decode_json_answer
from service.storage import audit, memories
from service.storage import consolidation as store

__all__ = [
    "CONSOLIDATE_OWNER_TASK",
    "CONSOLIDATION_QUEUE",
    "SUMMARIZE_ALL_TASK",
    "Outcome",
    "Owner",
    "OwnerResult",
    "RestoreResult",
    "RunReport",
    "consolidate",
    "defer_if_near_cap",
    "defer_owner",
    "due_owners",
    "params_from",
    "restore",
    "run_daily",
    "run_limit",
    "summarize",
]

log = logging.getLogger(__name__)

CONSOLIDATION_QUEUE = "consolidation"
SUMMARIZE_ALL_TASK = "summarize_all"
CONSOLIDATE_OWNER_TASK = "consolidate_owner"
ACTOR = "summarizer"
SUMMARY_MAX_TOKENS = 800
CHUNK_SIZE = 500
"""Memories one run clusters together at most, and retires per transaction at most (issue
26): an owner of 10,000 memories is clustered with 500 × 500 similarity matrices (1 MB)
instead of one 10,000² (400 MB), and applied in about 20 short transactions instead of one
that holds the owner's lock and a connection for the whole run. Within a chunk (a cell of
at most 500 memories, which the 200-memory cap keeps every ordinary owner to) nothing
changes."""
"""Completion tokens allowed for one summary answer (600 characters are about 200)."""


@dataclass(frozen=True, slots=True)
class Owner:
    """Whose memories a run consolidates."""

    kind: OwnerKind  #: user or folder
    id: str  #: user id or folder id

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.id}"


class Outcome(StrEnum):
    """What a run did to one owner."""

    APPLIED = "applied"  #: merges or pruning were committed
    NOTHING = "nothing"  #: nothing to merge or prune (or every cluster was left as it was)
    REFUSED = "refused"  #: the retirement guard refused the plan; nothing changed
    FAILED = "failed"  #: the LLM could not be reached; nothing changed
    PLANNED = "planned"  #: dry run: the plan only


@dataclass(frozen=True, slots=True)
class OwnerResult:
    """One owner's run."""

    owner: Owner  #: the owner
    plan: OwnerPlan  #: what was planned
    outcome: Outcome  #: what happened
    summaries: tuple[Memory, ...] = ()  #: summaries written
    merged: int = 0  #: sources archived into them
    pruned: int = 0  #: memories archived beyond the cap
    skipped: tuple[str, ...] = ()  #: clusters left as they were, one sentence each
    detail: str | None = None  #: the guard's or the failure's sentence

    @property
    def active_after(self) -> int:
        """The owner's active memories after the run (as planned, for a dry run)."""
        if self.outcome is Outcome.PLANNED:
            return self.plan.active_after
        return self.plan.active_before - self.merged - self.pruned + len(self.summaries)


@dataclass(frozen=True, slots=True)
class RunReport:
    """A run over several owners."""

    results: tuple[OwnerResult, ...]  #: one per owner looked at, in order
    stopped: str | None = None  #: why the run stopped early (the LLM is unreachable)

    @property
    def failed(self) -> bool:
        """True when the run stopped early or any owner failed."""
        return self.stopped is not None or any(r.outcome is Outcome.FAILED for r in self.results)

    def count(self, outcome: Outcome) -> int:
        """How many owners ended with `outcome`."""
        return sum(r.outcome is outcome for r in self.results)


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What `restore` brought back."""

    summary: Memory | None  #: the summary that was archived (None for a pruned memory)
    restored: tuple[Memory, ...] = field(default_factory=tuple)  #: memories active again


def params_from(settings: Settings) -> ConsolidationParams:
    """The summarizer's knobs from the settings (DESIGN §8 defaults)."""
    return ConsolidationParams(
        age_days=settings.consolidation_age_days,
        strategy=ClusterStrategy(settings.consolidation_strategy),
        cosine_threshold=settings.consolidation_cosine,
        duplicate_cosine=settings.consolidation_duplicate_cosine,
        min_cluster_size=settings.consolidation_min_cluster,
        max_cluster_size=max(
            settings.consolidation_max_cluster, settings.consolidation_min_cluster
        ),
        summary_max_chars=settings.consolidation_summary_max_chars,
        cap=settings.memory_cap,
        trigger_share=settings.consolidation_trigger_share,
        free_share=settings.consolidation_free_share,
        prune_strategy=PruneStrategy(settings.prune_strategy),
        guard_share=settings.consolidation_guard_share,
        half_life_days=settings.half_life_days,
        chunk_size=CHUNK_SIZE,
    )


async def due_owners(rt: Runtime, *, now: datetime) -> list[Owner]:
    """Owners with at least one memory past the age gate (folders, then users, by id)."""
    params = params_from(rt.settings)
    async with rt.db.unit_of_work() as session:
        found = await store.owners_due(session, stated_before=policy.cutoff(now, params))
    return [Owner(kind, owner_id) for kind, owner_id in found]


async def summarize(
    rt: Runtime,
    *,
    owners: Sequence[Owner] | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    on_owners: Callable[[int], None] | None = None,
    on_result: Callable[[OwnerResult], None] | None = None,
) -> RunReport:
    """The daily run: consolidate `owners` (None = every owner with old memories).

    Args:
        owners: whom to consolidate; None = `due_owners`.
        dry_run: plan only: no LLM call, no change.
        now: the run's time (tz-aware); None = the server clock. The age gate counts from it.
        on_owners: called once with the number of owners (progress display).
        on_result: called after each owner (progress display).

    Returns:
        One result per owner; stops early, leaving later owners untouched, when the LLM is
        unreachable.
    """
    now = now or datetime.now(UTC)
    todo = list(owners) if owners is not None else await due_owners(rt, now=now)
    if on_owners is not None:
        on_owners(len(todo))
    results: list[OwnerResult] = []
    for owner in todo:
        result = await consolidate(rt, owner=owner, trigger=Trigger.DAILY, now=now, dry_run=dry_run)
        results.append(result)
        if on_result is not None:
            on_result(result)
        if result.outcome is Outcome.FAILED:
            return RunReport(tuple(results), stopped=result.detail)
    return RunReport(tuple(results))


async def consolidate(
    rt: Runtime,
    *,
    owner: Owner,
    trigger: Trigger,
    now: datetime | None = None,
    dry_run: bool = False,
) -> OwnerResult:
    """Plan, summarize and apply one owner's run (see the module docstring).

    A limit-triggered run does nothing when the owner is no longer at the trigger share of
    the cap (a daily run got there first).
    """
    params = params_from(rt.settings)
    now = now or datetime.now(UTC)
    started = datetime.now(UTC)
    scope = policy.owner_scope(owner.kind, owner.id)
    async with rt.db.unit_of_work() as session:
        entries = await store.entries(session, scope=scope)
    if trigger is Trigger.LIMIT and not policy.near_cap(len(entries), params):
        plan = OwnerPlan(owner.kind, owner.id, trigger, active_before=len(entries))
        return OwnerResult(owner, plan, Outcome.NOTHING)
    # clustering thousands of memories is seconds of CPU: a worker thread's, never the loop's
    plan = await offload.in_worker(
        str(owner),
        policy.plan_owner,
        entries,
        owner_kind=owner.kind,
        owner_id=owner.id,
        now=now,
        params=params,
        trigger=trigger,
    )
    if dry_run:
        return OwnerResult(owner, plan, Outcome.PLANNED, detail=plan.refused)
    if plan.refused is not None:
        log.warning("summarizer refused %s: %s", owner, plan.refused)
        result = OwnerResult(owner, plan, Outcome.REFUSED, detail=plan.refused)
        await _record(rt, result, started=started)
        return result
    if plan.empty:
        return OwnerResult(owner, plan, Outcome.NOTHING)
    try:
        drafts = [await _summarize_cluster(rt, cluster, params=params) for cluster in plan.clusters]
    except (LLMUnavailable, LLMNotConfigured) as exc:
        log.warning("summarizer left %s as it was: %s", owner, exc)
        result = OwnerResult(owner, plan, Outcome.FAILED, detail=str(exc))
        await _record(rt, result, started=started)
        return result
    ready = [(c, d) for c, (d, _) in zip(plan.clusters, drafts, strict=True) if d is not None]
    skipped = [
        f"cluster of {counted(len(c.members), 'memory', 'memories')} ({c.bank.label}): {reason}"
        for c, (d, reason) in zip(plan.clusters, drafts, strict=True)
        if d is None
    ]
    vectors = await rt.encoder.encode([d.content for _, d in ready], bulk=True)
    return await _apply(
        rt,
        owner=owner,
        plan=plan,
        params=params,
        ready=[(c, d, vectors[i]) for i, (c, d) in enumerate(ready)],
        skipped=skipped,
        started=started,
    )


PLANTED_SUMMARY = "the summary reads as an instruction, not a fact"


async def _summarize_cluster(
    rt: Runtime, cluster: Cluster, *, params: ConsolidationParams
) -> tuple[SummaryDraft | None, str]:
    """`_ask_for_summary`, then the full planted-instruction check of every stored text
    (rules, nearest labelled examples, LLM verdict; per sentence): a refused summary leaves
    its sources as they were.
    """
    draft, reason = await _ask_for_summary(rt, cluster, params=params)
    if draft is not None and await planted_check.refuses_any_sentence(rt, draft.content):
        log.warning(
            "summary of %d memories left as they were: %s", len(cluster.members), PLANTED_SUMMARY
        )
        return None, PLANTED_SUMMARY
    return draft, reason


async def _ask_for_summary(
    rt: Runtime, cluster: Cluster, *, params: ConsolidationParams
) -> tuple[SummaryDraft | None, str]:
    """One LLM call and one repair retry when the answer is not valid (as extraction does).

    Returns:
        (draft, "") or (None, why the answer was refused).

    Raises:
        LLMUnavailable, LLMNotConfigured: the LLM could not answer.
    """
    limit = params.summary_max_chars
    messages = policy.build_summary_messages(cluster, max_chars=limit)
    answer = await rt.llm.complete(messages, json_answer=True, max_tokens=SUMMARY_MAX_TOKENS)
    try:
        return policy.parse_summary(
            decode_json_answer(answer), cluster=cluster, max_chars=limit
        ), ""
    except ExtractionOutputInvalid as exc:
        reason = str(exc)
        log.info("summary answer invalid (%s); retrying once with a repair prompt", reason)
    retry = [
        *messages,
        {"role": "assistant", "content": answer[:4000]},
        {"role": "user", "content": policy.REPAIR_PROMPT.format(reason=reason)},
    ]
    answer = await rt.llm.complete(retry, json_answer=True, max_tokens=SUMMARY_MAX_TOKENS)
    try:
        return policy.parse_summary(
            decode_json_answer(answer), cluster=cluster, max_chars=limit
        ), ""
    except ExtractionOutputInvalid as exc:
        log.warning("summary of %d memories left as they were: %s", len(cluster.members), exc)
        return None, str(exc)


Ready = list[tuple[Cluster, SummaryDraft, np.ndarray]]
"""Clusters whose summary is written: (cluster, the LLM's draft, the draft's vector)."""


def chunks_of(
    ready: Ready, prune: Sequence[Memory], *, size: int
) -> list[tuple[Ready, list[Memory]]]:
    """The applied plan cut into transactions that retire at most `size` memories each
    (a cluster is never split: its summary and its sources commit together), merges first,
    then pruning.
    """
    out: list[tuple[Ready, list[Memory]]] = []
    batch: Ready = []
    retired = 0
    for item in ready:
        if batch and retired + len(item[0].members) > size:
            out.append((batch, []))
            batch, retired = [], 0
        batch.append(item)
        retired += len(item[0].members)
    if batch:
        out.append((batch, []))
    nothing_merged: Ready = []
    out += [(nothing_merged, list(prune[i : i + size])) for i in range(0, len(prune), size)]
    return out


async def _apply(
    rt: Runtime,
    *,
    owner: Owner,
    plan: OwnerPlan,
    params: ConsolidationParams,
    ready: Ready,
    skipped: list[str],
    started: datetime,
) -> OwnerResult:
    """Write the summaries, archive their sources, prune — all audited, in transactions of
    at most `params.chunk_size` retired memories each (`chunks_of`), yielding to the loop
    between two, so an owner of 10,000 memories never holds its lock, a connection or the
    WAL for the whole run. Each transaction is whole on its own (a summary with all its
    sources); a run stopped between two leaves the owner consistent, and the next run plans
    from what is there.
    """
    summaries: list[Memory] = []
    merged = pruned = 0
    for clusters, prune in chunks_of(ready, plan.prune, size=params.chunk_size):
        async with rt.db.unit_of_work() as session:
            written, merged_here, pruned_here = await _apply_chunk(
                rt,
                session,
                owner=owner,
                plan=plan,
                params=params,
                ready=clusters,
                prune=prune,
                skipped=skipped,
            )
        summaries += written
        merged += merged_here
        pruned += pruned_here
        await asyncio.sleep(0)  # other owners' work runs between two chunks
    changed = bool(summaries or pruned)
    result = OwnerResult(
        owner,
        plan,
        Outcome.APPLIED if changed else Outcome.NOTHING,
        summaries=tuple(summaries),
        merged=merged,
        pruned=pruned,
        skipped=tuple(skipped),
    )
    if changed:
        await _record(rt, result, started=started)
    return result


async def _apply_chunk(
    rt: Runtime,
    session: AsyncSession,
    *,
    owner: Owner,
    plan: OwnerPlan,
    params: ConsolidationParams,
    ready: Ready,
    prune: Sequence[Memory],
    skipped: list[str],
) -> tuple[list[Memory], int, int]:
    """One transaction of `_apply`: (summaries written, sources merged, memories pruned)."""
    at = datetime.now(UTC)
    scope = policy.owner_scope(owner.kind, owner.id)
    await store.lock_owner(session, owner_kind=owner.kind, owner_id=owner.id)
    planned = [m for c, _, _ in ready for m in c.members] + list(prune)
    current = await store.current_versions(session, scope=scope, memory_ids=[m.id for m in planned])

    def unchanged(m: Memory) -> bool:
        return current.get(m.id) == m.updated_at

    summaries: list[Memory] = []
    merged = 0
    for cluster, draft, vector in ready:
        if not all(unchanged(m) for m in cluster.members):
            skipped.append(
                f"cluster of {counted(len(cluster.members), 'memory', 'memories')} "
                f"({cluster.bank.label}): "
                "a source changed since planning"
            )
            continue
        summary = await store.insert_summary(
            session,
            owner_kind=owner.kind,
            owner_id=owner.id,
            draft=draft,
            embedding=vector,
            embedding_model=rt.encoder.model_name,
            at=at,
        )
        span = f"{draft.first_stated_at:%Y-%m-%d} to {draft.last_stated_at:%Y-%m-%d}"
        await audit.record(
            session,
            memory_id=summary.id,
            owner_id=owner.id,
            actor=ACTOR,
            action="create",
            reason=f"summary of {counted(len(cluster.members), 'memory', 'memories')} "
            f"stated {span} "
            f"({plan.trigger.value} run)",
            after={
                **audit.snapshot(summary),
                "summary_of": [str(i) for i in draft.source_ids],
                "stated_from": draft.first_stated_at.isoformat(),
                "stated_to": draft.last_stated_at.isoformat(),
            },
        )
        merged += await store.archive_into_summary(
            session, source_ids=draft.source_ids, summary_id=summary.id, at=at
        )
        for source in cluster.members:
            await audit.record(
                session,
                memory_id=source.id,
                owner_id=owner.id,
                actor=ACTOR,
                action="archive",
                reason=f"merged into summary {summary.id}",
                before=audit.snapshot(source),
                after={"status": Status.ARCHIVED.value, "superseded_by": str(summary.id)},
            )
        summaries.append(summary)
    prune = [m for m in prune if unchanged(m)]
    pruned = await store.archive(session, memory_ids=[m.id for m in prune], at=at)
    for memory in prune:
        await audit.record(
            session,
            memory_id=memory.id,
            owner_id=owner.id,
            actor=ACTOR,
            action="archive",
            reason=f"pruned beyond the cap of {params.cap} ({params.prune_strategy.value})",
            before=audit.snapshot(memory),
            after={"status": Status.ARCHIVED.value},
        )
    return summaries, merged, pruned


def _run_record(result: OwnerResult, *, started: datetime) -> store.RunRecord:
    detail = result.detail or ("; ".join(result.skipped) if result.skipped else None)
    return store.RunRecord(
        owner_kind=result.owner.kind,
        owner_id=result.owner.id,
        trigger=result.plan.trigger.value,
        outcome=result.outcome.value,
        active_before=result.plan.active_before,
        active_after=result.active_after,
        summaries=len(result.summaries),
        merged=result.merged,
        pruned=result.pruned,
        detail=detail,
        started_at=started,
        finished_at=datetime.now(UTC),
    )


async def _record(rt: Runtime, result: OwnerResult, *, started: datetime) -> None:
    async with rt.db.unit_of_work() as session:
        await store.record_run(session, run=_run_record(result, started=started))


# --- the limit trigger --------------------------------------------------------------------


async def defer_if_near_cap(
    rt: Runtime,
    *,
    user_id: str,
    folder_id: str | None,
    written: int,
    assistant_owner: str | None = None,
) -> None:
    """After an extraction committed: queue a consolidation of each owner it wrote to whose
    active count reached the trigger share of the cap (DESIGN §8: 80 % of 200).

    At most one job waits per owner (a queueing lock). Never raises: the extraction is done
    whatever happens here.
    """
    if written <= 0:
        return
    try:
        params = params_from(rt.settings)
        owners = [Owner(OwnerKind.USER, user_id)]
        if folder_id:
            owners.append(Owner(OwnerKind.FOLDER, folder_id))
        if assistant_owner:  # an assistant chat wrote only there
            owners = [Owner(OwnerKind.ASSISTANT, assistant_owner)]
        async with rt.db.unit_of_work() as session:
            counts = [
                (o, await memories.count_active(session, scope=policy.owner_scope(o.kind, o.id)))
                for o in owners
            ]
        for owner, count in counts:
            if policy.near_cap(count, params):
                await defer_owner(rt, owner=owner)
    except Exception:
        log.exception("could not check the memory cap of %s", user_id)


async def defer_owner(rt: Runtime, *, owner: Owner) -> bool:
    """Queue `consolidate_owner` for `owner`; False when one is already waiting."""
    if not await rt.jobs.defer(
        CONSOLIDATE_OWNER_TASK,
        queue=CONSOLIDATION_QUEUE,
        queueing_lock=f"consolidate:{owner}",
        owner_kind=owner.kind.value,
        owner_id=owner.id,
    ):
        return False
    log.info("queued a consolidation of %s (near the cap)", owner)
    return True


async def run_limit(rt: Runtime, *, owner_kind: str, owner_id: str) -> OwnerResult:
    """Job body of `consolidate_owner`: free about 20 % of the cap for one owner."""
    result = await consolidate(
        rt, owner=Owner(OwnerKind(owner_kind), owner_id), trigger=Trigger.LIMIT
    )
    log.info("limit consolidation of %s:%s: %s", owner_kind, owner_id, result.outcome.value)
    return result


async def run_daily(rt: Runtime, *, timestamp: int | None = None) -> RunReport:
    """Job body of the periodic `summarize_all`; `timestamp` is the period's start (epoch s)."""
    report = await summarize(rt, now=datetime.now(UTC))
    log.info(
        "daily summarizer (period %s): %d owners, %d applied, %d refused%s",
        datetime.fromtimestamp(timestamp, UTC).isoformat() if timestamp else "-",
        len(report.results),
        report.count(Outcome.APPLIED),
        report.count(Outcome.REFUSED),
        f"; stopped: {report.stopped}" if report.stopped else "",
    )
    return report


# --- restore ------------------------------------------------------------------------------


async def restore(rt: Runtime, *, memory_id: uuid.UUID, actor: str = "operator") -> RestoreResult:
    """Undo a merge: make a summary's sources active again and archive the summary.

    `memory_id` may be the summary, one of its archived sources, or a memory archived by
    pruning (which alone comes back). Restored memories are pinned: the summarizer never
    merges or prunes them again. Audited.

    Raises:
        MemoryNotFound: no active or archived memory with this id.
        InvalidInput: the memory is active and not a summary, or was archived by something
            other than the summarizer.
    """
    at = datetime.now(UTC)
    async with rt.db.unit_of_work() as session:
        owner = await store.owner_of(session, memory_id=memory_id)
        if owner is None:
            raise MemoryNotFound(f"no memory {memory_id}")
        scope = policy.owner_scope(*owner)
        await store.lock_owner(session, owner_kind=owner[0], owner_id=owner[1])
        kept = (Status.ACTIVE, Status.ARCHIVED)
        target = await memories.get(session, scope=scope, memory_id=memory_id, statuses=kept)
        if target is None:
            raise MemoryNotFound(f"memory {memory_id} is neither active nor archived")
        summary = target if target.source_kind is SourceKind.SUMMARY else None
        if summary is None and target.status is Status.ARCHIVED and target.superseded_by:
            summary = await memories.get(
                session, scope=scope, memory_id=target.superseded_by, statuses=kept
            )
            if summary is None or summary.source_kind is not SourceKind.SUMMARY:
                raise InvalidInput(f"memory {memory_id} was not merged by the summarizer")
        if summary is None:
            if target.status is not Status.ARCHIVED:
                raise InvalidInput(f"memory {memory_id} is active and not a summary")
            await memories.set_status(session, memory_id=target.id, status=Status.ACTIVE, at=at)
            await audit.record(
                session,
                memory_id=target.id,
                owner_id=target.owner_id,
                actor=actor,
                action=store.RESTORE_ACTION,
                reason="restored from pruning",
                after={"status": "active"},
            )
            return RestoreResult(None, (dataclasses.replace(target, status=Status.ACTIVE),))
        restored = await store.restore_sources(session, scope=scope, summary_id=summary.id, at=at)
        for memory in restored:
            await audit.record(
                session,
                memory_id=memory.id,
                owner_id=memory.owner_id,
                actor=actor,
                action=store.RESTORE_ACTION,
                reason=f"restored from summary {summary.id}",
                after={"status": "active"},
            )
        if summary.status is Status.ACTIVE:
            await memories.set_status(session, memory_id=summary.id, status=Status.ARCHIVED, at=at)
            await audit.record(
                session,
                memory_id=summary.id,
                owner_id=summary.owner_id,
                actor=actor,
                action="archive",
                reason=f"its {len(restored)} sources were restored",
                before=audit.snapshot(summary),
                after={"status": Status.ARCHIVED.value},
            )
    return RestoreResult(summary, tuple(restored))
