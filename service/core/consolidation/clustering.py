"""Which memories of one (owner, bank) cell merge: the clustering strategies of
`ClusterStrategy`, run to a fixpoint (see the package docstring, step 2).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from service.core import limits
from service.core.consolidation.params import ClusterStrategy, ConsolidationParams
from service.core.records import Bank, Memory, OwnerKind

__all__ = ["HYBRID_TAG_BONUS", "Cluster", "Entry", "cluster_entries"]

HYBRID_TAG_BONUS = 0.1
"""Cosine added, in the `hybrid` strategy, for a memory sharing a tag with the cluster's seed."""

_SEPARATOR_CHARS = 2  # "; " between two merged facts


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
        """The members' owner kind (one owner per cluster)."""
        return self.members[0].owner_kind

    @property
    def owner_id(self) -> str:
        """The members' owner id."""
        return self.members[0].owner_id

    @property
    def bank(self) -> Bank:
        """The members' bank (one bank per cluster)."""
        return self.members[0].bank

    @property
    def tags(self) -> tuple[str, ...]:
        """The sources' tags, first seen first, at most `limits.MAX_TAGS` (a memory's cap)."""
        return tuple(dict.fromkeys(t for m in self.members for t in m.tags))[: limits.MAX_TAGS]

    @property
    def first_stated_at(self) -> datetime:
        """When the oldest source was stated."""
        return min(m.created_at for m in self.members)

    @property
    def last_stated_at(self) -> datetime:
        """When the newest source was stated."""
        return max(m.created_at for m in self.members)

    @property
    def ids(self) -> tuple[uuid.UUID, ...]:
        """The sources' ids, oldest stated first."""
        return tuple(m.id for m in self.members)


# --- clustering ---------------------------------------------------------------------------


def cluster_entries(entries: Sequence[Entry], *, params: ConsolidationParams) -> list[Cluster]:
    """Cluster memories by the configured strategy, to a fixpoint.

    Every cluster lies within one (owner kind, owner, bank) cell. Memories are visited oldest
    first (ties by `seq`), so the result depends only on the input set. After the first
    pass the leftovers are clustered again until a pass finds nothing: the memories left
    unmerged would form no cluster on their own, which makes a second run a no-op.

    A cell of more than `params.chunk_size` memories is clustered in consecutive chunks of
    that many (in stated order), so the similarity matrix stays chunk² (1 MB at 500) however
    many memories an owner holds; the leftovers of all chunks are pooled and chunked again on
    the next pass, so memories of neighbouring chunks still meet. A cell within one chunk is
    clustered exactly as without chunks.

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
        size = max(params.chunk_size, 2)
        while pool:
            found = [
                c
                for start in range(0, len(pool), size)
                for c in _one_pass(pool[start : start + size], params)
            ]
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
    threshold, the cluster has room and the texts still fit.
    """
    n = len(pool)
    if n < 2:
        return []
    vectors = np.stack([np.asarray(e.vector, dtype=np.float32) for e in pool])
    sims = vectors @ vectors.T  # (n, n) cosine: vectors are L2-normalized
    lengths = np.array([len(e.memory.content) for e in pool], dtype=np.int64)
    assigned = np.zeros(n, dtype=bool)
    clusters: list[Cluster] = []
    for seed in range(n):
        if assigned[seed]:
            continue
        seed_tags = set(pool[seed].memory.tags)
        bonus = (
            np.array([HYBRID_TAG_BONUS if seed_tags & set(e.memory.tags) else 0.0 for e in pool])
            if tag_bonus and seed_tags
            else None
        )
        members = [seed]
        chars = int(lengths[seed])
        while len(members) < params.max_cluster_size:
            total = sims[members].sum(axis=0)  # (n,) Σ cos(v_j, v_m) over members m
            norm = math.sqrt(max(float(sims[np.ix_(members, members)].sum()), 1e-12))
            affinity = total / norm  # cosine of each memory to the members' centroid
            if bonus is not None:
                affinity = affinity + bonus
            # the first of the closest open memories, if it reaches the threshold
            open_ = ~assigned & (chars + _SEPARATOR_CHARS + lengths <= params.source_max_chars)
            open_[members] = False
            ranked = np.where(open_, affinity, -np.inf)
            best = int(np.argmax(ranked))
            if not open_[best] or not ranked[best] >= params.cosine_threshold:
                break
            members.append(best)
            chars += _SEPARATOR_CHARS + int(lengths[best])
        cluster = _qualify([pool[i] for i in members], sims[np.ix_(members, members)], params)
        if cluster is not None:
            clusters.append(cluster)
            assigned[members] = True
    return clusters


def _by_tags(pool: Sequence[Entry], params: ConsolidationParams) -> list[Cluster]:
    """Consecutive runs (in time order) of memories with the same primary (first) tag, cut
    when a run is full or its texts would no longer fit a summary.
    """
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
