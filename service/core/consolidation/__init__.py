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

The package's modules: `params` (the knobs), `clustering` (step 2), `planning` (steps 1, 3
and 4, and the printable plan) and `summary` (the prompt and the validation of the LLM's
answer). Callers import the package: `from service.core import consolidation as policy`.
"""

from __future__ import annotations

from service.core.consolidation.clustering import HYBRID_TAG_BONUS, Cluster, Entry, cluster_entries
from service.core.consolidation.params import (
    SOURCE_SHARE,
    ClusterStrategy,
    ConsolidationParams,
    PruneStrategy,
    Trigger,
)
from service.core.consolidation.planning import (
    OwnerPlan,
    PlanLine,
    cutoff,
    describe,
    free_target,
    near_cap,
    owner_scope,
    plan_owner,
    prune_order,
)
from service.core.consolidation.summary import (
    REPAIR_PROMPT,
    SUMMARY_SYSTEM_PROMPT,
    SummaryDraft,
    build_summary_messages,
    key_terms,
    parse_summary,
    source_refs,
)

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
