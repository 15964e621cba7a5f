"""Consolidation policy (DESIGN §8): which old memories merge, what a run may retire, and the
summary contract with the LLM. Pure: no I/O.

A run looks at one owner (a user, or a folder) at a time:

1. **Eligible** are the owner's active memories stated at least `age_days` ago (DESIGN §8:
   7 days), that have an embedding, are not themselves summaries, and were not restored by
   an operator (a restored memory is pinned: never merged or pruned again automatically).
2. **Clusters** form within one (owner, bank) cell only — never across owners or banks — by
   the configured strategy: `embeddings` (greedy by cosine to the cluster's centroid),
   `tags` (the same primary tag, in time order) or `hybrid` (cosine, with a bonus for
   memories that share a tag with the cluster's seed). A cluster has at least
   `min_cluster_size` (3) members, or is a group of near-duplicates (2 or more whose
   pairwise cosine reaches `duplicate_cosine`), and at most `max_cluster_size` members whose
   texts together fit in a summary.
3. **Pruning** beyond the per-owner cap (200) archives the oldest (`fifo`) or least relevant
   (`least_relevant`) memories that are past the age gate.
4. **The guard** refuses the owner's whole run when it would lower the owner's active count
   by more than `guard_share` (the net loss: merged sources minus their summaries, plus
   pruned memories).

The daily run clusters to a fixpoint: the memories it leaves unmerged would not cluster
again, so a second run with the same memories finds nothing to do (idempotency). The limit
trigger (80 % of the cap) frees about 20 % of the cap, oldest clusters first.

Numbers from the founding design (seeds/001): cluster ≥ 3, cap 200, trigger 0.8, target
reduction 0.2 of the cap, strategies embeddings/tags/hybrid, pruning fifo/least_relevant.
The cosine threshold (0.85), the cluster size (≤ 4) and the `embeddings` default are measured
(`bench/summarizer_replay.py`, docs/howto/summarizer.md): with all-MiniLM-L6-v2, facts about
one person share their name and themes, so lower thresholds merge distinct events, and a
long summary both ranks lower and costs more of the token budget than the fact a question
needs — recall fell 2 to 19 points at 0.82 to 0.6, and held at 0.85.
"""

from __future__ import annotations

import math
import re
import unicodedata
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import numpy as np

from service.core import limits, safety
from service.core.records import Bank, Memory, OwnerKind, ReadScope, Scope, Status
from service.errors import SummaryOutputInvalid

__all__ = [
    "HYBRID_TAG_BONUS",
    "REPAIR_PROMPT",
    "SOURCE_SHARE",
    "SUMMARY_SYSTEM_PROMPT",
    "Cluster",
    "ClusterStrategy",
    "ConsolidationParams",
    "Entry",
    "OwnerPlan",
    "PlanLine",
    "PruneStrategy",
    "SummaryDraft",
    "Trigger",
    "build_summary_messages",
    "cluster_entries",
    "cutoff",
    "describe",
    "free_target",
    "key_terms",
    "near_cap",
    "owner_scope",
    "parse_summary",
    "plan_owner",
    "prune_order",
    "source_refs",
]

HYBRID_TAG_BONUS = 0.1
"""Cosine added, in the `hybrid` strategy, for a memory sharing a tag with the cluster's seed."""

SOURCE_SHARE = 0.8
"""Share of the summary's character limit the sources of one cluster may fill together; the
rest leaves room for dates and connecting words, so a faithful merge always fits."""

_SEPARATOR_CHARS = 2  # "; " between two merged facts


class ClusterStrategy(StrEnum):
    """How the summarizer groups memories (seeds/001)."""

    EMBEDDINGS = "embeddings"  #: greedy: cosine to the cluster's centroid ≥ threshold
    TAGS = "tags"  #: the same primary (first) tag, in time order
    HYBRID = "hybrid"  #: embeddings, with HYBRID_TAG_BONUS for a tag shared with the seed


class PruneStrategy(StrEnum):
    """Which memories are archived beyond the cap (seeds/001)."""

    FIFO = "fifo"  #: oldest stated first
    LEAST_RELEVANT = "least_relevant"  #: lowest confidence × recency of last use first


class Trigger(StrEnum):
    """Why a run happens; stored with the run's record."""

    DAILY = "daily"  #: the periodic job (every 24 h) or `summarize` on the CLI
    LIMIT = "limit"  #: the owner reached the trigger share of the cap


@dataclass(frozen=True, slots=True)
class ConsolidationParams:
    """Knobs of the summarizer; defaults from DESIGN §8 and §11 (seeds/001)."""

    age_days: float = 7.0  #: only memories stated at least this many days ago merge or prune
    strategy: ClusterStrategy = ClusterStrategy.EMBEDDINGS  #: clustering strategy
    cosine_threshold: float = 0.85  #: min cosine to the cluster centroid (embeddings, hybrid)
    duplicate_cosine: float = 0.85  #: pairwise cosine at which 2 memories merge as duplicates
    min_cluster_size: int = 3  #: smallest cluster (DESIGN §8)
    max_cluster_size: int = 4  #: largest cluster
    summary_max_chars: int = 600  #: longest summary text (chars)
    cap: int = 200  #: active memories per owner (seeds/001)
    trigger_share: float = 0.8  #: the limit trigger fires at this share of the cap
    free_share: float = 0.2  #: a limit-triggered run frees this share of the cap
    prune_strategy: PruneStrategy = PruneStrategy.FIFO  #: beyond the cap (seeds/001: fifo)
    guard_share: float = 0.5  #: largest net fall of an owner's active count in one run
    half_life_days: float = 60.0  #: recency half-life for `least_relevant` (DESIGN §6.2)

    @property
    def source_max_chars(self) -> int:
        """Characters the source texts of one cluster may take together."""
        return int(self.summary_max_chars * SOURCE_SHARE)


@dataclass(frozen=True, slots=True)
class Entry:
    """One active memory as the summarizer sees it."""

    memory: Memory  #: the memory (status active)
    vector: np.ndarray | None  #: (d,) float32, L2-normalized; None when not embedded yet
    pinned: bool = False  #: restored by an operator: never merged or pruned automatically


@dataclass(frozen=True, slots=True)
class Cluster:
    """Memories of one owner and bank that one summary replaces."""

    members: tuple[Memory, ...]  #: the sources, oldest stated first
    duplicates: bool = False  #: True when merged as near-duplicates (may be only 2)

    @property
    def owner_kind(self) -> OwnerKind:
        return self.members[0].owner_kind

    @property
    def owner_id(self) -> str:
        return self.members[0].owner_id

    @property
    def bank(self) -> Bank:
        return self.members[0].bank

    @property
    def tags(self) -> tuple[str, ...]:
        """The sources' tags, first seen first, at most `limits.MAX_TAGS` (a memory's cap)."""
        return tuple(dict.fromkeys(t for m in self.members for t in m.tags))[: limits.MAX_TAGS]

    @property
    def first_stated_at(self) -> datetime:
        return min(m.created_at for m in self.members)

    @property
    def last_stated_at(self) -> datetime:
        return max(m.created_at for m in self.members)

    @property
    def ids(self) -> tuple[uuid.UUID, ...]:
        return tuple(m.id for m in self.members)


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
        return not self.clusters and not self.prune


@dataclass(frozen=True, slots=True)
class SummaryDraft:
    """A validated summary, ready to be stored in place of its cluster."""

    content: str  #: the merged text (NFC), at most `summary_max_chars`
    bank: Bank  #: the sources' bank (never the LLM's choice)
    tags: tuple[str, ...]  #: every tag of the sources
    confidence: float  #: the lowest confidence of the sources
    first_stated_at: datetime  #: when the oldest source was stated
    last_stated_at: datetime  #: when the newest source was stated; the summary's own date
    source_ids: tuple[uuid.UUID, ...]  #: the merged memories, oldest first


# --- owners and thresholds ----------------------------------------------------------------


def owner_scope(owner_kind: OwnerKind, owner_id: str) -> ReadScope:
    """Every cell one owner has: a user's Personal and Interaction Patterns banks, a
    folder's Project Memory, or one user's memory for one assistant (DESIGN §3)."""
    if owner_kind is OwnerKind.FOLDER:
        return ReadScope((Scope(OwnerKind.FOLDER, owner_id, Bank.PROJECT),))
    if owner_kind is OwnerKind.ASSISTANT:
        return ReadScope((Scope(OwnerKind.ASSISTANT, owner_id, Bank.ASSISTANT),))
    return ReadScope(
        (
            Scope(OwnerKind.USER, owner_id, Bank.PERSONAL),
            Scope(OwnerKind.USER, owner_id, Bank.INTERACTION),
        )
    )


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


# --- clustering ---------------------------------------------------------------------------


def cluster_entries(entries: Sequence[Entry], *, params: ConsolidationParams) -> list[Cluster]:
    """Cluster memories by the configured strategy, to a fixpoint.

    Every cluster lies within one (owner kind, owner, bank) cell. Memories are visited oldest
    first (ties by `seq`), so the result depends only on the input set. After the first
    pass the leftovers are clustered again until a pass finds nothing: the memories left
    unmerged would form no cluster on their own, which makes a second run a no-op.

    Args:
        entries: memories with their vectors; all are taken as eligible (see `plan_owner`).
        params: strategy, thresholds and sizes.

    Returns:
        Clusters in the order they were formed; members oldest first.
    """
    cells: dict[tuple[str, str, str], list[Entry]] = {}
    for entry in sorted(entries, key=lambda e: (e.memory.created_at, e.memory.seq)):
        m = entry.memory
        cells.setdefault((m.owner_kind.value, m.owner_id, m.bank.value), []).append(entry)
    clusters: list[Cluster] = []
    for cell in cells.values():
        pool = [e for e in cell if e.vector is not None]
        while pool:
            found = _one_pass(pool, params)
            if not found:
                break
            clusters.extend(found)
            taken = {m.id for c in found for m in c.members}
            pool = [e for e in pool if e.memory.id not in taken]
    return clusters


def _one_pass(pool: Sequence[Entry], params: ConsolidationParams) -> list[Cluster]:
    if params.strategy is ClusterStrategy.TAGS:
        return _by_tags(pool, params)
    return _greedy(pool, params, tag_bonus=params.strategy is ClusterStrategy.HYBRID)


def _greedy(
    pool: Sequence[Entry], params: ConsolidationParams, *, tag_bonus: bool
) -> list[Cluster]:
    """Greedy centroid clustering: each unassigned memory in turn seeds a cluster, which takes
    the unassigned memory most similar to its centroid while that similarity reaches the
    threshold, the cluster has room and the texts still fit."""
    n = len(pool)
    if n < 2:
        return []
    vectors = np.stack([np.asarray(e.vector, dtype=np.float32) for e in pool])
    sims = vectors @ vectors.T  # (n, n) cosine: vectors are L2-normalized
    lengths = [len(e.memory.content) for e in pool]
    assigned = np.zeros(n, dtype=bool)
    clusters: list[Cluster] = []
    for seed in range(n):
        if assigned[seed]:
            continue
        seed_tags = set(pool[seed].memory.tags)
        members = [seed]
        chars = lengths[seed]
        while len(members) < params.max_cluster_size:
            total = sims[members].sum(axis=0)  # (n,) Σ cos(v_j, v_m) over members m
            norm = math.sqrt(max(float(sims[np.ix_(members, members)].sum()), 1e-12))
            affinity = total / norm  # cosine of each memory to the members' centroid
            if tag_bonus and seed_tags:
                affinity = affinity + np.array(
                    [HYBRID_TAG_BONUS if seed_tags & set(e.memory.tags) else 0.0 for e in pool]
                )
            best, best_affinity = -1, params.cosine_threshold
            for j in range(n):
                if assigned[j] or j in members:
                    continue
                if chars + _SEPARATOR_CHARS + lengths[j] > params.source_max_chars:
                    continue
                if affinity[j] >= best_affinity and (best < 0 or affinity[j] > best_affinity):
                    best, best_affinity = j, float(affinity[j])
            if best < 0:
                break
            members.append(best)
            chars += _SEPARATOR_CHARS + lengths[best]
        cluster = _qualify([pool[i] for i in members], sims[np.ix_(members, members)], params)
        if cluster is not None:
            clusters.append(cluster)
            assigned[members] = True
    return clusters


def _by_tags(pool: Sequence[Entry], params: ConsolidationParams) -> list[Cluster]:
    """Consecutive runs (in time order) of memories with the same primary (first) tag, cut
    when a run is full or its texts would no longer fit a summary."""
    groups: dict[str, list[int]] = {}
    for i, entry in enumerate(pool):
        if entry.memory.tags:
            groups.setdefault(entry.memory.tags[0], []).append(i)
    vectors = np.stack([np.asarray(e.vector, dtype=np.float32) for e in pool])
    clusters: list[Cluster] = []

    def close(chunk: list[int]) -> None:
        if chunk:
            sub = vectors[chunk]
            cluster = _qualify([pool[j] for j in chunk], sub @ sub.T, params)
            if cluster is not None:
                clusters.append(cluster)

    for indices in groups.values():
        chunk: list[int] = []
        chars = 0
        for i in indices:
            size = len(pool[i].memory.content)
            if chunk and (
                len(chunk) >= params.max_cluster_size
                or chars + _SEPARATOR_CHARS + size > params.source_max_chars
            ):
                close(chunk)
                chunk, chars = [], 0
            chars += size + (_SEPARATOR_CHARS if chunk else 0)
            chunk.append(i)
        close(chunk)
    return clusters


def _qualify(
    members: Sequence[Entry], sims: np.ndarray, params: ConsolidationParams
) -> Cluster | None:
    """A cluster when big enough, or when its 2+ members are all near-duplicates."""
    memories = tuple(sorted((e.memory for e in members), key=lambda m: (m.created_at, m.seq)))
    if len(members) >= params.min_cluster_size:
        return Cluster(memories)
    if len(members) >= 2 and float(sims.min()) >= params.duplicate_cosine:
        return Cluster(memories, duplicates=True)
    return None


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


# --- the summary contract with the LLM ------------------------------------------------------


SUMMARY_SYSTEM_PROMPT = """You merge several memories that a chat assistant keeps about one \
user (or about one shared project) into ONE memory that replaces them.
Rules:
- Keep every fact of every source memory: every name, number, place, preference and date.
  Leave nothing out. Only what several sources say alike may be said once.
- Add nothing that is not in the sources; do not guess, judge or generalize.
- When the sources were stated on different dates and the time matters for a fact, keep its
  date next to it as an absolute date.
- Write in the language of the sources, in the same voice (e.g. "User …"), as one compact
  text; separate facts with semicolons.
- At most {max_chars} characters.
Answer with ONE JSON object and nothing else:
{{"content": "the merged memory", "covers": ["s1", "s2", "..."]}}
"covers" lists the ref of every source memory whose facts your content keeps."""

REPAIR_PROMPT = (
    "Your previous answer was not valid: {reason}. Answer again with only the JSON object "
    '{{"content": "...", "covers": [...]}}, keeping every fact of every source memory.'
)


def source_refs(cluster: Cluster) -> dict[str, Memory]:
    """Short refs the prompt shows for the sources: s1, s2, … in time order."""
    return {f"s{i + 1}": m for i, m in enumerate(cluster.members)}


def build_summary_messages(cluster: Cluster, *, max_chars: int) -> list[dict[str, str]]:
    """Chat messages asking the LLM to merge `cluster` into one memory.

    The sources appear one per line inside `<source_memories>` as
    `[s1] (YYYY-MM-DD) text`, oldest first.
    """
    lines = "\n".join(
        f"[{ref}] ({m.created_at:%Y-%m-%d}) {m.content}" for ref, m in source_refs(cluster).items()
    )
    kind = "near-duplicates of one fact" if cluster.duplicates else "related memories"
    user = (
        f"Bank: {cluster.bank.label}\n"
        f"These {len(cluster.members)} source memories are {kind}.\n\n"
        f"SOURCE MEMORIES (ref, date stated, text):\n"
        f"<source_memories>\n{lines}\n</source_memories>"
    )
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT.format(max_chars=max_chars)},
        {"role": "user", "content": user},
    ]


# Straight and typographic apostrophes both join a possessive to its word.
_WORD = re.compile(r"[^\W_][\w'’.:/-]*", re.UNICODE)  # noqa: RUF001
_TRAILING = re.compile(r"(['’]s|[.:/'’-])+$", re.IGNORECASE)  # noqa: RUF001
_PLAIN_WORDS = frozenset({"user", "user's", "i", "the", "a", "an"})


def key_terms(text: str) -> set[str]:
    """Words of `text` a faithful merge must keep: numbers and capitalized words that do not
    open a sentence (names, places, brands), case-folded, without a possessive "'s".

    A heuristic, not a proof: it catches a summary that drops a name, a number or a date.
    """
    terms: set[str] = set()
    opens_sentence = True
    for match in _WORD.finditer(text):
        word = match.group(0)
        core = _TRAILING.sub("", word)
        if (
            core
            and core.casefold() not in _PLAIN_WORDS
            and (any(ch.isdigit() for ch in core) or (core[0].isupper() and not opens_sentence))
        ):
            terms.add(core.casefold())
        following = text[match.end() : match.end() + 1]
        opens_sentence = following in ("!", "?") or (
            word.endswith(".") and not _is_abbreviation(word)
        )
    return terms


def _is_abbreviation(word: str) -> bool:
    return word.rstrip(".") in {"Dr", "Mr", "Mrs", "Ms", "St", "Prof", "e.g", "i.e", "vs"}


def parse_summary(data: Any, *, cluster: Cluster, max_chars: int) -> SummaryDraft:
    """Validate the LLM's decoded answer into a summary of `cluster`.

    The bank, tags, dates and confidence come from the sources, never from the answer: the
    summary keeps the sources' bank (case 19: summaries must not reset banks or tags).

    Args:
        data: the decoded JSON answer: `{"content": str, "covers": [refs]}`.
        cluster: the sources.
        max_chars: the longest allowed text (chars).

    Raises:
        SummaryOutputInvalid: no text, too long, instruction-like, a source left out of
            `covers`, or a name or number of a source missing from the text.
    """
    if not isinstance(data, Mapping):
        raise SummaryOutputInvalid("the answer is not a JSON object")
    raw = data.get("content", data.get("summary", data.get("memory")))
    content = unicodedata.normalize("NFC", str(raw)).strip() if isinstance(raw, str) else ""
    content = safety.redact_secrets(content)
    if not content:
        raise SummaryOutputInvalid("the answer has no 'content' text")
    if len(content) > max_chars:
        raise SummaryOutputInvalid(
            f"the summary has {len(content)} characters; at most {max_chars} are allowed"
        )
    if safety.looks_like_instruction(content):
        raise SummaryOutputInvalid("the summary reads as an instruction, not a fact")
    refs = source_refs(cluster)
    covers = data.get("covers")
    if not isinstance(covers, list):
        raise SummaryOutputInvalid("the answer has no 'covers' list")
    named = {str(c).strip().strip("[]") for c in covers}
    missing_refs = [r for r in refs if r not in named]
    if missing_refs:
        raise SummaryOutputInvalid(f"the summary does not cover {', '.join(missing_refs)}")
    folded = content.casefold()
    lost = [
        f"{term!r} ({ref})"
        for ref, m in refs.items()
        for term in sorted(key_terms(m.content))
        if term not in folded
    ]
    if lost:
        raise SummaryOutputInvalid(f"the summary leaves out {', '.join(lost[:5])}")
    return SummaryDraft(
        content=content,
        bank=cluster.bank,
        tags=cluster.tags,
        confidence=min(m.confidence for m in cluster.members),
        first_stated_at=cluster.first_stated_at,
        last_stated_at=cluster.last_stated_at,
        source_ids=cluster.ids,
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
