"""The summarizer's knobs and the names of its choices (DESIGN §8, seeds/001)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["SOURCE_SHARE", "ClusterStrategy", "ConsolidationParams", "PruneStrategy", "Trigger"]

SOURCE_SHARE = 0.8
"""Share of the summary's character limit the sources of one cluster may fill together; the
rest leaves room for dates and connecting words, so a faithful merge always fits."""


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
    #: memories of one cell clustered together at most (the similarity matrix is chunk²), and
    #: memories one transaction of the run retires at most (issue 26: bounded chunks)
    chunk_size: int = 500

    @property
    def source_max_chars(self) -> int:
        """Characters the source texts of one cluster may take together."""
        return int(self.summary_max_chars * SOURCE_SHARE)
