"""What one run does to one owner: eligibility, pruning beyond the cap, the loss guard, and
the plan as printable lines (see the package docstring, steps 1, 3 and 4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from service.core import banks
from service.core.consolidation.clustering import Cluster, Entry, cluster_entries
from service.core.consolidation.params import ConsolidationParams, PruneStrategy, Trigger
from service.core.records import Bank, Memory, OwnerKind, ReadScope, Status

__all__ = [
    "OwnerPlan",
    "PlanLine",
    "cutoff",
    "describe",
    "free_target",
    "near_cap",
    "owner_scope",
    "plan_owner",
    "prune_order",
]


@dataclass(frozen=True, slots=True)
class OwnerPlan:
    """What one run would do to one owner."""

    owner_kind: OwnerKind  #: user or folder
    owner_id: str  #: user id or folder id
    trigger: Trigger  #: daily or limit
    active_before: int  #: the owner's active memories when planned
    clusters: tuple[Cluster, ...] = ()  #: merges, each into one summary
    prune: tuple[Memory, ...] = ()  #: archived beyond the cap, oldest/least relevant first
    refused: str | None = None  #: the guard's sentence when the run must not happen

    @property
    def merged(self) -> int:
        """Sources retired into summaries."""
        return sum(len(c.members) for c in self.clusters)

    @property
    def retired(self) -> int:
        """Memories the run archives: merged sources and pruned memories."""
        return self.merged + len(self.prune)

    @property
    def active_after(self) -> int:
        """Active memories once the run is applied in full."""
        return self.active_before - self.retired + len(self.clusters)

    @property
    def empty(self) -> bool:
        """True when the plan neither merges nor prunes anything."""
        return not self.clusters and not self.prune


# --- owners and thresholds ----------------------------------------------------------------


def owner_scope(owner_kind: OwnerKind, owner_id: str) -> ReadScope:
    """Every cell one owner has: a user's Personal and Interaction Patterns banks, a
    folder's Project Memory, or one user's memory for one assistant (DESIGN §3).
    """
    return ReadScope(banks.owner_cells(owner_kind, owner_id))


def near_cap(active_count: int, params: ConsolidationParams) -> bool:
    """True when an owner's active count reached the limit trigger (≥ 80 % of the cap)."""
    return active_count >= math.ceil(params.trigger_share * params.cap)


def free_target(params: ConsolidationParams) -> int:
    """Memories a limit-triggered run frees (net): 20 % of the cap, 40 of 200 (seeds/001)."""
    return max(1, math.ceil(params.free_share * params.cap))


def _age_days(memory: Memory, now: datetime) -> float:
    return (now - memory.created_at).total_seconds() / 86_400.0


def _eligible(entry: Entry, *, now: datetime, params: ConsolidationParams, age_gate: bool) -> bool:
    m = entry.memory
    return (
        m.status is Status.ACTIVE
        and not m.source_kind.is_summary
        and not entry.pinned
        and entry.vector is not None
        and (not age_gate or _age_days(m, now) >= params.age_days)
    )


# --- pruning ------------------------------------------------------------------------------


def prune_order(
    entries: Iterable[Entry], *, now: datetime, params: ConsolidationParams
) -> list[Memory]:
    """Memories in the order pruning archives them; summaries come after every other memory.

    `fifo`: oldest stated first. `least_relevant`: lowest confidence × 0.5 ** (days since
    last injected, or since stated when never injected / half_life_days) first — the read
    path's half-life (DESIGN §6.2) applied to use instead of a query. Ties: lower `seq` first.
    """

    def relevance(m: Memory) -> float:
        seen = m.last_used_at or m.created_at
        days = max((now - seen).total_seconds(), 0.0) / 86_400.0
        return m.confidence * math.pow(0.5, days / params.half_life_days)

    def fifo_key(m: Memory) -> tuple[bool, datetime, int]:
        return (m.source_kind.is_summary, m.created_at, m.seq)

    def relevance_key(m: Memory) -> tuple[bool, float, int]:
        return (m.source_kind.is_summary, relevance(m), m.seq)

    memories = [e.memory for e in entries]
    if params.prune_strategy is PruneStrategy.LEAST_RELEVANT:
        return sorted(memories, key=relevance_key)
    return sorted(memories, key=fifo_key)


# --- the plan -----------------------------------------------------------------------------


def plan_owner(
    entries: Sequence[Entry],
    *,
    owner_kind: OwnerKind,
    owner_id: str,
    now: datetime,
    params: ConsolidationParams,
    trigger: Trigger = Trigger.DAILY,
) -> OwnerPlan:
    """Plan one run over one owner's active memories.

    Daily run: clusters every eligible memory (age gate applies) to a fixpoint, then prunes
    the memories beyond the cap that are past the age gate, then clusters what pruning left
    once more (so the next run finds nothing). Limit run: eligibility ignores the age gate,
    and whole clusters are taken oldest first (by their newest member) until they free
    `free_target` memories; then the same pruning. In both, the guard refuses the plan when
    it lowers the active count by more than `guard_share` of `active_before`.

    Args:
        entries: every active memory of the owner (all banks), with vectors and pins.
        owner_kind, owner_id: the owner.
        now: the run's time (tz-aware).
        params: thresholds, sizes, cap and strategies.
        trigger: daily or limit.

    Returns:
        The plan; `refused` is set (and the plan must not be applied) when the guard says no.
    """
    active = [e for e in entries if e.memory.status is Status.ACTIVE]
    limit = trigger is Trigger.LIMIT
    eligible = [e for e in active if _eligible(e, now=now, params=params, age_gate=not limit)]
    clusters = cluster_entries(eligible, params=params)
    if limit:
        clusters.sort(key=lambda c: (c.last_stated_at, c.members[0].seq))
        chosen: list[Cluster] = []
        freed = 0
        for cluster in clusters:
            if freed >= free_target(params):
                break
            chosen.append(cluster)
            freed += len(cluster.members) - 1
        clusters = chosen
    merged_ids = {m.id for c in clusters for m in c.members}
    after = len(active) - len(merged_ids) + len(clusters)
    prune: list[Memory] = []
    if after > params.cap:
        candidates = [
            e
            for e in active
            if e.memory.id not in merged_ids
            and not e.pinned
            and _age_days(e.memory, now) >= params.age_days
        ]
        prune = prune_order(candidates, now=now, params=params)[: after - params.cap]
        if not limit and prune:
            pruned = {m.id for m in prune}
            rest = [e for e in eligible if e.memory.id not in merged_ids | pruned]
            clusters += cluster_entries(rest, params=params)
    plan = OwnerPlan(
        owner_kind=owner_kind,
        owner_id=owner_id,
        trigger=trigger,
        active_before=len(active),
        clusters=tuple(clusters),
        prune=tuple(prune),
    )
    refused = _guard(plan, params)
    if refused is None:
        return plan
    return OwnerPlan(
        owner_kind=owner_kind,
        owner_id=owner_id,
        trigger=trigger,
        active_before=plan.active_before,
        clusters=plan.clusters,
        prune=plan.prune,
        refused=refused,
    )


def _guard(plan: OwnerPlan, params: ConsolidationParams) -> str | None:
    """The loss guard (case 19): a run may lower the owner's active count by at most
    `guard_share` of it; beyond that the whole run is refused, never trimmed.

    The loss is the net fall of the active count — sources merged minus the summaries that
    replace them, plus pruned memories — so merging 2 duplicates of a 3-memory user (a loss
    of 1) passes, while collapsing 100 memories into 10 summaries (a loss of 90) does not.
    """
    loss = plan.active_before - plan.active_after
    if plan.active_before == 0 or loss <= params.guard_share * plan.active_before:
        return None
    return (
        f"the run would lower the active memories from {plan.active_before} to "
        f"{plan.active_after} (-{loss / plan.active_before:.0%}); the guard allows at most "
        f"-{params.guard_share:.0%}"
    )


def cutoff(now: datetime, params: ConsolidationParams) -> datetime:
    """The newest `created_at` the age gate lets through."""
    return now - timedelta(days=params.age_days)


@dataclass(frozen=True, slots=True)
class PlanLine:
    """One printable line of a plan (for `--dry-run`)."""

    action: str  #: "merge", "merge duplicates" or "prune"
    bank: Bank  #: the bank concerned
    seqs: tuple[int, ...] = field(default_factory=tuple)  #: short ids of the memories


def describe(plan: OwnerPlan) -> list[PlanLine]:
    """The plan as lines: one per cluster, then one per bank for pruned memories."""
    lines = [
        PlanLine(
            "merge duplicates" if c.duplicates else "merge", c.bank, tuple(m.seq for m in c.members)
        )
        for c in plan.clusters
    ]
    by_bank: dict[Bank, list[int]] = {}
    for m in plan.prune:
        by_bank.setdefault(m.bank, []).append(m.seq)
    lines += [PlanLine("prune", bank, tuple(seqs)) for bank, seqs in by_bank.items()]
    return lines
