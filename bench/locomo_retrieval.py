"""Retrieval quality on LoCoMo without an LLM: BM25, dense-only cosine and the service's read path.

    python -m bench.locomo_retrieval --data ../shared/data/locomo/locomo10.json

Follows the retrieval-only protocol of `../shared/bench/LOCOMO.md` on all 10 conversations:

1. One memory pool per conversation. A turn's memory text is `"<speaker>: <text>"` plus
   `" [shares <blip_caption>]"` when it shares an image (`bench.locomo.conversation_turns`);
   each memory is dated by its session date and covers its own dia_id.
2. Every question of categories 1–4, verbatim, is searched in its conversation's pool; the top
   50 come back.
3. Evidence ids are cleaned by `bench.locomo.load_qa` (LOCOMO.md step 3), giving n = 1,536.
4. Metrics per question, then averaged overall and per category (`recall_at_k`, `hit_at_k`,
   `ndcg_at_k`, `reciprocal_rank` below).

The same is done a second time with the dataset's `observation` facts as memories: one memory
per fact, its text verbatim, dated by its session, covering every dia_id it cites.

Retrievers, all over the same texts and the same vectors (each text is embedded once):

- **bm25**: rank-bm25's Okapi BM25 with k1 = 1.2, b = 0.75 over `tokenize` (lower-cased
  `[a-z0-9]+` tokens without scikit-learn's English stop words, no stemming), LOCOMO.md's
  reference setting.
- **bm25_short_stoplist**: the same with `FUNCTION_WORDS` as the stop list, a sensitivity run
  (scikit-learn's list also drops content words).
- **dense**: exact cosine top-k with all-MiniLM-L6-v2 — what Open WebUI memory plugins do.
- **ours**: the service's read path. The memories are inserted with
  `service.storage.memories.insert` into a migrated embedded PostgreSQL (one owner per pool,
  bank personal), and each question is ranked by `service.flows.context.retrieve` — or, where
  that function does not exist, by an adapter doing what the inlet did before it: exact vector
  search of 50 candidates, then `service.core.ranking.rank_candidates` with threshold 0. It is
  measured as a full ranking (`ours`) and, where `retrieve` takes `apply_gate`, also after the
  relevance bands (`ours_gated`: what the inlet may inject before the token budget).
  `--ablations` adds runs with one ranking knob off at a time (`service_variants`).

Ties are broken by insertion order everywhere. Results: `bench/results/locomo_retrieval.json`,
`.md` and `.png` (Recall@10 per category and retriever).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import inspect
import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import (
    CATEGORY_NAMES,
    DEFAULT_DATA_PATH,
    QA_CATEGORIES,
    REPO_ROOT,
    QAItem,
    conversation_turns,
    last_session_date,
    load_conversations,
    load_qa,
    parse_session_date,
    speaker_facts,
    speakers,
)

__all__ = [
    "KS",
    "Pool",
    "block_coverage",
    "bootstrap_difference",
    "hit_at_k",
    "main",
    "ndcg_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "summarize",
    "tokenize",
]

DEFAULT_OUT_DIR = REPO_ROOT / "bench" / "results"
#: Cut-offs of Recall@k (LOCOMO.md step 4).
KS: tuple[int, ...] = (1, 5, 10, 25, 50)
#: Results returned per question (LOCOMO.md step 2).
TOP_K = 50
#: Okapi BM25 parameters of LOCOMO.md's reference figures.
BM25_K1, BM25_B = 1.2, 0.75
#: n of LOCOMO.md step 3 for locomo10.json, categories 1–4.
EXPECTED_QUESTIONS = 1_536
#: Single-query embedding timings are taken on this many adversarial (category 5) questions:
#: real questions that the benchmark never embeds otherwise, so none is an encoder cache hit.
EMBED_TIMING_QUERIES = 100
WARMUP_QUERIES = 20

_TOKEN = re.compile(r"[a-z0-9]+")

#: A short stop list of English function words only (articles, pronouns, auxiliaries,
#: prepositions, conjunctions, question words), for the `bm25_short_stoplist` sensitivity run.
#: scikit-learn's 318-word list also drops content verbs and nouns that LoCoMo questions hinge
#: on ("find", "go", "see", "made", "give", "name", "part", "move", "fire"...).
FUNCTION_WORDS = frozenset(
    """
a an the and or but nor if then else so than too very of at by for with about against to from
in on into onto out off over under up down through during before after above below again
further once is are was were be been being am do does did doing have has had having i me my
mine myself you your yours yourself he him his himself she her hers herself it its itself we
us our ours ourselves they them their theirs themselves what which who whom whose this that
these those when where why how there here all any both each few more most other some such no
not only own same can could will would shall should may might must just now s t don
""".split()
)


def tokenize(text: str, stop_words: Collection[str] | None = None) -> list[str]:
    """BM25 tokens: lower-cased `[a-z0-9]+` runs without stop words, no stemming.

    Args:
        stop_words: words to drop; None = scikit-learn's `ENGLISH_STOP_WORDS` (318 words), as
            in LOCOMO.md's BM25 reference.
    """
    if stop_words is None:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        stop_words = ENGLISH_STOP_WORDS
    return [token for token in _TOKEN.findall(text.lower()) if token not in stop_words]


def _covered(ranked: Sequence[Collection[str]], k: int) -> set[str]:
    return {dia_id for cover in ranked[:k] for dia_id in cover}


def recall_at_k(ranked: Sequence[Collection[str]], evidence: Collection[str], k: int) -> float:
    """Share of the evidence ids covered by the top `k` memories, in [0, 1].

    Args:
        ranked: for each retrieved memory, best first, the dia_ids it covers (one for a turn,
            the cited ones for an observation fact).
        evidence: the question's cleaned evidence ids (at least one).
        k: cut-off (memories).
    """
    wanted = set(evidence)
    return len(wanted & _covered(ranked, k)) / len(wanted)


def hit_at_k(ranked: Sequence[Collection[str]], evidence: Collection[str], k: int) -> float:
    """1.0 when any of the top `k` memories covers an evidence id, else 0.0."""
    return 1.0 if set(evidence) & _covered(ranked, k) else 0.0


def _relevant(cover: Collection[str], evidence: Collection[str]) -> bool:
    return any(dia_id in evidence for dia_id in cover)


def ndcg_at_k(
    ranked: Sequence[Collection[str]], evidence: Collection[str], k: int, n_relevant: int
) -> float:
    """NDCG@k with binary relevance, in [0, 1].

    A memory is relevant (gain 1) when it covers at least one evidence id. DCG = Σ gain_i /
    log2(i + 1) over ranks i = 1..k; the ideal DCG puts `min(n_relevant, k)` relevant memories
    first (Järvelin & Kekäläinen, 2002).

    Args:
        n_relevant: relevant memories in the whole pool (for turns, the number of evidence ids;
            for facts, the facts citing any of them). 0 gives 0.0.
    """
    if n_relevant <= 0:
        return 0.0
    wanted = set(evidence)
    dcg = sum(
        1.0 / math.log2(rank + 1)
        for rank, cover in enumerate(ranked[:k], start=1)
        if _relevant(cover, wanted)
    )
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(n_relevant, k) + 1))
    return dcg / ideal


def reciprocal_rank(ranked: Sequence[Collection[str]], evidence: Collection[str]) -> float:
    """1 / rank of the first memory covering an evidence id, 0.0 when none is retrieved."""
    wanted = set(evidence)
    for rank, cover in enumerate(ranked, start=1):
        if _relevant(cover, wanted):
            return 1.0 / rank
    return 0.0


def question_metrics(
    ranked: Sequence[Collection[str]], evidence: Collection[str], n_relevant: int
) -> dict[str, float]:
    """Every per-question figure: recall@k for `KS`, hit@10, ndcg@10 and rr (each in [0, 1])."""
    out = {f"recall@{k}": recall_at_k(ranked, evidence, k) for k in KS}
    out["hit@10"] = hit_at_k(ranked, evidence, 10)
    out["ndcg@10"] = ndcg_at_k(ranked, evidence, 10, n_relevant)
    out["mrr"] = reciprocal_rank(ranked, evidence)
    return out


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means in percent of `question_metrics` values, overall and per category.

    Args:
        rows: one per question: {"category": int, "metrics": question_metrics(...)}.

    Returns:
        {"overall": {"n", metric: %}, "by_category": {"1": {...}, ...}}; percentages rounded
        to 0.1.
    """

    def mean(group: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if not group:
            return {"n": 0}
        names = group[0]["metrics"].keys()
        return {"n": len(group)} | {
            name: round(100.0 * float(np.mean([r["metrics"][name] for r in group])), 1)
            for name in names
        }

    return {
        "overall": mean(rows),
        "by_category": {
            str(c): mean([r for r in rows if r["category"] == c]) for c in QA_CATEGORIES
        },
    }


def bootstrap_difference(
    ours: Sequence[float], base: Sequence[float], *, resamples: int = 2_000, seed: int = 0
) -> dict[str, float]:
    """Mean of ours − base in points with a percentile bootstrap 95 % interval.

    Questions are resampled with replacement (`resamples` times, a fixed seed, so a run is
    reproducible); the two retrievers' values are paired by question.

    Args:
        ours, base: one value in [0, 1] per question, same order and length.

    Returns:
        {"diff", "low", "high"} in percentage points, rounded to 0.1.
    """
    a, b = np.asarray(ours, dtype=float), np.asarray(base, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("bootstrap needs two non-empty lists of the same length")
    delta = a - b
    rng = np.random.default_rng(seed)
    means = delta[rng.integers(0, delta.size, size=(resamples, delta.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "diff": round(100.0 * float(delta.mean()), 1),
        "low": round(100.0 * float(low), 1),
        "high": round(100.0 * float(high), 1),
    }


def block_coverage(
    ranked: Sequence[int],
    costs: Sequence[int],
    covers: Sequence[Collection[str]],
    evidence: Collection[str],
    budget_tokens: int,
) -> float:
    """Share of `evidence` covered when `ranked` fills `budget_tokens` best first.

    The inlet's rule: an item is taken while its rendered line fits what is left of the
    budget, else skipped (a shorter one after it may still fit).

    Args:
        ranked: memory indices, best first.
        costs: tokens of each memory's rendered line (`- [date] text`), by index.
        covers: dia_ids each memory covers, by index.
    """
    spent, covered = 0, set()
    for index in ranked:
        if spent + costs[index] > budget_tokens:
            continue
        spent += costs[index]
        covered |= set(covers[index])
    wanted = set(evidence)
    return len(wanted & covered) / len(wanted)


# -- pools ------------------------------------------------------------------------------------


@dataclass
class Pool:
    """One conversation's memories as one retriever sees them (insertion order = list order)."""

    conversation_id: str  #: sample_id, e.g. "conv-26"
    kind: str  #: "turns" or "observations"
    owner_id: str  #: the service owner id holding these memories
    texts: list[str]  #: memory contents
    covers: list[frozenset[str]]  #: dia_ids each memory covers
    dates: list[datetime]  #: session date of each memory (UTC)
    now: datetime  #: query time: the day after the last session
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 384), np.float32))  #: (n, 384)
    by_memory_id: dict[Any, int] = field(default_factory=dict)  #: service memory id → index
    _bm25: dict[str, Any] = field(default_factory=dict)

    def n_relevant(self, evidence: Collection[str]) -> int:
        """Memories of this pool covering at least one of `evidence`."""
        wanted = set(evidence)
        return sum(1 for cover in self.covers if cover & wanted)

    def bm25_top(
        self, question: str, k: int, stop_words: Collection[str] | None = None
    ) -> list[int]:
        """Indices of the `k` best memories by Okapi BM25, ties in insertion order.

        Args:
            stop_words: see `tokenize` (None = scikit-learn's list).
        """
        key = "sklearn" if stop_words is None else "custom"
        if key not in self._bm25:
            from rank_bm25 import BM25Okapi

            self._bm25[key] = BM25Okapi(
                [tokenize(t, stop_words) for t in self.texts], k1=BM25_K1, b=BM25_B
            )
        scores = self._bm25[key].get_scores(tokenize(question, stop_words))
        top: list[int] = np.argsort(-scores, kind="stable")[:k].tolist()
        return top

    def dense_top(self, query_vector: np.ndarray, k: int) -> list[int]:
        """Indices of the `k` nearest memories by cosine (vectors are unit length)."""
        scores = self.vectors @ query_vector
        top: list[int] = np.argsort(-scores, kind="stable")[:k].tolist()
        return top


def _session_date(sample: Mapping[str, Any], session: int) -> datetime:
    return parse_session_date(sample["conversation"][f"session_{session}_date_time"])


def turn_pool(sample: Mapping[str, Any]) -> Pool:
    """The pool of a conversation's turns (LOCOMO.md step 1)."""
    turns = conversation_turns(sample)
    conv = str(sample["sample_id"])
    return Pool(
        conversation_id=conv,
        kind="turns",
        owner_id=f"locomo-{conv}-turns",
        texts=[f"{t.speaker}: {t.text}" for t in turns],
        covers=[frozenset({t.dia_id}) for t in turns],
        dates=[_session_date(sample, t.session) for t in turns],
        now=last_session_date(sample) + timedelta(days=1),
    )


def observation_pool(sample: Mapping[str, Any]) -> Pool:
    """The pool of a conversation's observation facts, by session, speaker_a's first."""
    facts = sorted(
        (f for s in speakers(sample) for f in speaker_facts(sample, s)), key=lambda f: f.session
    )  # stable: speaker_a before speaker_b per session
    conv = str(sample["sample_id"])
    return Pool(
        conversation_id=conv,
        kind="observations",
        owner_id=f"locomo-{conv}-facts",
        texts=[f.text for f in facts],
        covers=[frozenset(f.dia_ids) for f in facts],
        dates=[_session_date(sample, f.session) for f in facts],
        now=last_session_date(sample) + timedelta(days=1),
    )


# -- the service ------------------------------------------------------------------------------


def _scrubbed_environment() -> None:
    """Drop the service's variables from the environment so defaults are measured."""
    for name in list(os.environ):
        if name.startswith(("MEMORY_", "LLM_")) or name == "DATABASE_URL":
            os.environ.pop(name)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


@contextlib.asynccontextmanager
async def service_runtime(url: str, state_dir: Path, encoder: Any) -> Any:
    """The service's `Runtime`, built by its own app lifespan on database `url` (no workers)."""
    from pydantic import SecretStr

    from service.api.app import create_app
    from service.config import Settings

    settings = Settings(
        DATABASE_URL=url,
        MEMORY_API_KEY=SecretStr("bench-only"),
        MEMORY_STATE_DIR=state_dir,
        MEMORY_RUN_WORKERS=False,
    )
    app = create_app(settings, encoder=encoder)
    async with app.router.lifespan_context(app):
        yield app.state.runtime


def retrieval_function() -> tuple[Callable[..., Any], str]:
    """`service.flows.context.retrieve` when it exists, else the adapter; and its name."""
    from service.flows import context

    function = getattr(context, "retrieve", None)
    if function is not None:
        return function, "service.flows.context.retrieve"
    return _adapter_retrieve, "adapter: storage.memory_search.search + core.ranking.rank_candidates"


async def _adapter_retrieve(
    rt: Any,
    *,
    scope: Any,
    query: str,
    now: datetime,
    limit: int,
    params: Any = None,
    apply_gate: bool = False,
    query_vector: np.ndarray | None = None,
) -> list[Any]:
    """The inlet's ranking before `retrieve` existed: exact vector top-`limit`, then the blend.

    Without `apply_gate` the relevance threshold is 0, so a full top `limit` comes back.
    """
    from service.core import ranking
    from service.storage import memory_search

    params = params or rt.ranking_params()
    if not apply_gate:
        params = dataclasses.replace(params, relevance_threshold=0.0)
    vector = query_vector if query_vector is not None else await rt.encoder.encode_one(query)
    async with rt.db.unit_of_work() as session:
        candidates = await memory_search.search(
            session, scope=scope, query_vector=vector, limit=limit
        )
    return ranking.rank_candidates(candidates, now=now, params=params)[:limit]


def service_variants(
    rt: Any, retrieve: Callable[..., Any], *, ablations: bool
) -> dict[str, dict[str, Any]]:
    """Keyword arguments of `retrieve` for each measured variant of our read path.

    - ours: the full ranking (no relevance gate), what the protocol's top 50 asks for;
    - with `ablations`, one ranking knob switched off at a time: MMR (λ = 1), recency
      (relevance weight 1), the full-text branch (its RRF weight 0).
    Variants whose knob `retrieve` does not take are left out.
    """
    accepted = set(inspect.signature(retrieve).parameters)
    variants: dict[str, dict[str, Any]] = {"ours": {}}
    if "apply_gate" in accepted:
        variants["ours"] = {"apply_gate": False}
    if ablations and "params" in accepted:
        base = rt.ranking_params()
        knobs = {
            "ours_no_mmr": {"mmr_lambda": 1.0},
            "ours_no_recency": {"relevance_weight": 1.0},
            "ours_no_fulltext": {"keyword_weight": 0.0},
        }
        for name, change in knobs.items():
            if all(hasattr(base, knob) for knob in change):
                variants[name] = variants["ours"] | {"params": dataclasses.replace(base, **change)}
    return variants


async def insert_pool(rt: Any, pool: Pool) -> float:
    """Store `pool` through `service.storage.memories.insert`; returns seconds spent."""
    from service.core.records import Bank, OwnerKind, SourceKind
    from service.storage import memories

    started = time.perf_counter()
    async with rt.db.unit_of_work() as session:
        for index, (text, cover, date) in enumerate(
            zip(pool.texts, pool.covers, pool.dates, strict=True)
        ):
            memory = await memories.insert(
                session,
                owner_kind=OwnerKind.USER,
                owner_id=pool.owner_id,
                bank=Bank.PERSONAL,
                content=text,
                tags=(),
                confidence=0.9,
                source_kind=SourceKind.EXTRACTION,
                source_chat_id=f"{pool.conversation_id}-{pool.kind}",
                source_message_id=",".join(sorted(cover)) or None,
                created_at=date,
                embedding=pool.vectors[index],
                embedding_model=rt.encoder.model_name,
            )
            pool.by_memory_id[memory.id] = index
    return time.perf_counter() - started


def read_scope(owner_id: str) -> Any:
    """The read scope of one pool: the owner's Personal bank."""
    from service.core.records import Bank, OwnerKind, ReadScope, Scope

    return ReadScope((Scope(OwnerKind.USER, owner_id, Bank.PERSONAL),))


# -- running ----------------------------------------------------------------------------------


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    p50, p95 = np.percentile(np.asarray(values, dtype=float), [50, 95])
    return {"p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3)}


@dataclass
class RunRecord:
    """What one retriever produced over one corpus."""

    rows: list[dict[str, Any]] = field(default_factory=list)  #: per question
    search_ms: list[float] = field(default_factory=list)  #: timed searches (after warm-up)
    tokens_top10: list[int] = field(default_factory=list)  #: tokens of the top-10 texts
    returned: list[int] = field(default_factory=list)  #: memories returned per question
    rankings: list[list[int]] = field(default_factory=list)  #: indices per question


async def evaluate(
    pools: Sequence[Pool],
    questions: Mapping[str, Sequence[QAItem]],
    search: Callable[[Pool, QAItem], Any],
    embed_ms: Mapping[str, float] | None = None,
) -> RunRecord:
    """Run `search` (pool, question) → indices best first over every question; time each call.

    The first `WARMUP_QUERIES` questions are run once untimed before the timed pass. With
    `embed_ms` (question → ms its single embedding took) each timing includes embedding the
    question, as the inlet pays it: search time + that question's embedding time.
    """
    from service.core.tokens import estimate_tokens

    record = RunRecord()
    warm = [(p, q) for p in pools for q in questions[p.conversation_id]][:WARMUP_QUERIES]
    for pool, question in warm:
        await search(pool, question)
    for pool in pools:
        for question in questions[pool.conversation_id]:
            started = time.perf_counter()
            indices = await search(pool, question)
            elapsed = (time.perf_counter() - started) * 1000.0
            record.search_ms.append(elapsed + (embed_ms or {}).get(question.question, 0.0))
            ranked = [pool.covers[i] for i in indices]
            record.rows.append(
                {
                    "conversation": pool.conversation_id,
                    "index": question.index,
                    "category": question.category,
                    "metrics": question_metrics(
                        ranked, question.evidence, pool.n_relevant(question.evidence)
                    ),
                }
            )
            record.tokens_top10.append(
                estimate_tokens("\n".join(pool.texts[i] for i in indices[:10]))
            )
            record.returned.append(len(indices))
            record.rankings.append(list(indices))
    return record


#: Token budgets of the injected block that are measured (400 is the default).
BUDGETS: tuple[int, ...] = (200, 400, 800)
#: The headline split (LOCOMO.md: tune on conversations 0–4, report 5–9) and the others.
SPLITS: Mapping[str, tuple[int, ...]] = {
    "5-9": (5, 6, 7, 8, 9),
    "all": tuple(range(10)),
    "0-4": (0, 1, 2, 3, 4),
}
#: Metrics whose difference ours − baseline gets a bootstrap interval.
CI_METRICS: tuple[str, ...] = ("recall@1", "recall@10", "mrr")
#: Constants of the read path chosen by looking at LoCoMo — all on conversations 0–4.
TUNED_CONSTANTS: tuple[tuple[str, str, str, str], ...] = (
    (
        "fusion",
        "normalised score fusion (min-max cosine, BM25 / best)",
        "RRF k = 60; min-max vs raw cosine",
        "0–4",
    ),
    ("keyword_weight / semantic_weight", "0.5 / 0.5", "0.3–0.7 in steps of 0.1", "0–4"),
    ("BM25 k1 (storage.hybrid_search.BM25_K1)", "0.9", "0.6, 0.9, 1.2, 1.5, 2.0", "0–4"),
    ("BM25 b (storage.hybrid_search.BM25_B)", "0.4", "0.3, 0.4, 0.5, 0.6, 0.75, 0.9", "0–4"),
    ("MEMORY_RELEVANCE_WEIGHT (recency 1 − w)", "0.95", "1, 0.98, 0.95, 0.9, 0.8", "0–4"),
    ("core memories", "after the relevant items (≤ 1/3)", "before them (≤ 1/3), none", "0–4"),
    ("MMR λ", "0.8 (unchanged)", "0.8, 0.9, 1", "0–4"),
)


def _split_rows(rows: Sequence[Mapping[str, Any]], ids: Collection[str]) -> list[Any]:
    return [r for r in rows if r["conversation"] in ids]


def _report(
    record: RunRecord,
    pools: Sequence[Pool],
    load: tuple[float, float],
    per_question: bool,
    split_ids: Mapping[str, Collection[str]],
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "splits": {
            name: summarize(_split_rows(record.rows, ids)) for name, ids in split_ids.items()
        },
        "memories_stored": sum(len(p.texts) for p in pools),
        "tokens_top10_mean": round(float(np.mean(record.tokens_top10)), 1),
        "returned_mean": round(float(np.mean(record.returned)), 1),
        "returned_none_share": round(100.0 * float(np.mean(np.array(record.returned) == 0)), 1),
        "search_latency": _percentiles(record.search_ms)
        | {"n": len(record.search_ms), "loadavg_1min_before_after": [round(x, 2) for x in load]},
    }
    if per_question:
        report["per_question"] = {
            "fields": ["conversation", "qa index", "category", "recall@10", "reciprocal rank"],
            "rows": [
                [
                    r["conversation"],
                    r["index"],
                    r["category"],
                    round(r["metrics"]["recall@10"], 3),
                    round(r["metrics"]["mrr"], 3),
                ]
                for r in record.rows
            ],
        }
    return report


def _intervals(
    records: Mapping[str, RunRecord], split_ids: Mapping[str, Collection[str]]
) -> dict[str, Any]:
    """Bootstrap intervals of ours − each baseline, per split and metric."""
    ours = records["ours"]
    out: dict[str, Any] = {}
    for split, ids in split_ids.items():
        mine = _split_rows(ours.rows, ids)
        out[split] = {}
        for name in BASELINES:
            theirs = _split_rows(records[name].rows, ids)
            out[split][name] = {
                metric: bootstrap_difference(
                    [r["metrics"][metric] for r in mine], [r["metrics"][metric] for r in theirs]
                )
                for metric in CI_METRICS
            }
    return out


async def _blocks(
    pools: Sequence[Pool],
    questions: Mapping[str, Sequence[QAItem]],
    records: Mapping[str, RunRecord],
    rt: Any,
    split_ids: Mapping[str, Collection[str]],
) -> dict[str, Any]:
    """What reaches the model: evidence inside the block, per budget, split and category.

    Ours is the inlet's own block (`service.flows.context.recall`: gate, profile or core
    memories, one budget, no fact twice); each baseline's top 50 fills the same budget best
    first with the same rendered lines. Also counted for ours: facts injected twice, items,
    and what core memories add (coverage of the whole block minus that of its relevant
    items alone).
    """
    from service.core import injection
    from service.core.records import ChatContext, ChatKind
    from service.core.tokens import estimate_tokens
    from service.flows import context

    costs = {
        p.conversation_id: [
            estimate_tokens(f"- [{d:%Y-%m-%d}] {t}") for t, d in zip(p.texts, p.dates, strict=True)
        ]
        for p in pools
    }
    per_budget: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for budget in BUDGETS:
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in (*BASELINES, "ours")}
        for name in BASELINES:
            position = 0
            for pool in pools:
                for q in questions[pool.conversation_id]:
                    ranked = records[name].rankings[position]
                    position += 1
                    share = block_coverage(
                        ranked, costs[pool.conversation_id], pool.covers, q.evidence, budget
                    )
                    rows[name].append(
                        {"conversation": pool.conversation_id, "category": q.category, "v": share}
                    )
        _progress(f"blocks at {budget} tokens: ours (the inlet's block)")
        for pool in pools:
            chat = ChatContext(user_id=pool.owner_id, kind=ChatKind.SAVED, chat_id="bench")
            wanted_all = {q.question: set(q.evidence) for q in questions[pool.conversation_id]}
            for q in questions[pool.conversation_id]:
                result = await context.recall(
                    rt, chat=chat, message=q.question, budget_tokens=budget, now=pool.now
                )
                indices = [pool.by_memory_id[m.memory.id] for m in result.items]
                core = indices[: result.core_count]
                keys = [injection.content_words(pool.texts[i]) for i in indices]
                wanted = wanted_all[q.question]
                whole = {d for i in indices for d in pool.covers[i]}
                items_only = {d for i in indices[result.core_count :] for d in pool.covers[i]}
                rows["ours"].append(
                    {
                        "conversation": pool.conversation_id,
                        "category": q.category,
                        "v": len(wanted & whole) / len(wanted),
                        "items_only": len(wanted & items_only) / len(wanted),
                        "items": len(indices),
                        "core": len(core),
                        "repeats": len(keys) - len({" ".join(sorted(k)) for k in keys}),
                        "tokens": estimate_tokens(
                            "\n".join(
                                f"- [{pool.dates[i]:%Y-%m-%d}] {pool.texts[i]}" for i in indices
                            )
                        ),
                    }
                )
        per_budget[budget] = rows
    out: dict[str, Any] = {}
    for split, ids in split_ids.items():
        out[split] = {}
        for budget, rows in per_budget.items():
            entry: dict[str, Any] = {}
            for name, values in rows.items():
                chosen = [r for r in values if r["conversation"] in ids]
                entry[name] = {
                    "overall": round(100.0 * float(np.mean([r["v"] for r in chosen])), 1),
                    "by_category": {
                        str(c): round(
                            100.0 * float(np.mean([r["v"] for r in chosen if r["category"] == c])),
                            1,
                        )
                        for c in QA_CATEGORIES
                    },
                }
                if name == "ours":
                    entry[name] |= {
                        "relevant_items_only": round(
                            100.0 * float(np.mean([r["items_only"] for r in chosen])), 1
                        ),
                        "items_mean": round(float(np.mean([r["items"] for r in chosen])), 2),
                        "core_mean": round(float(np.mean([r["core"] for r in chosen])), 2),
                        "repeated_facts": int(sum(r["repeats"] for r in chosen)),
                        "tokens_mean": round(float(np.mean([r["tokens"] for r in chosen])), 1),
                    }
            out[split][str(budget)] = entry
    return out


#: Baselines every run reports beside ours (LOCOMO.md, "Baselines at their best").
BASELINES: tuple[str, ...] = ("bm25", "dense", "rrf", "bm25_sklearn")


def _embed_with_cache(encoder: Any, texts: Sequence[str], cache_dir: Path | None) -> np.ndarray:
    """(len(texts), dim) vectors; texts already in `cache_dir/locomo_vectors_<model>.npz`
    are read from it, the others embedded and added (bench/.work/ is not committed).
    """
    path = None if cache_dir is None else cache_dir / f"locomo_vectors_{encoder.model_name}.npz"
    known: dict[str, np.ndarray] = {}
    if path is not None and path.exists():
        with np.load(path, allow_pickle=False) as stored:
            known = dict(zip(stored["texts"].tolist(), stored["vectors"], strict=True))
    missing = sorted({t for t in texts if t not in known})
    if missing:
        known |= dict(zip(missing, encoder.encode_sync(missing), strict=True))
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            names = list(known)
            np.savez(path, texts=np.array(names), vectors=np.stack([known[t] for t in names]))
    else:
        _progress(f"memory vectors read from {path}")
    return np.stack([known[t] for t in texts]).astype(np.float32)


async def run_benchmark(
    data: Path,
    conversations: Sequence[int] | None,
    *,
    ablations: bool = False,
    per_question: bool = False,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """The whole benchmark; returns the JSON document."""
    _scrubbed_environment()
    # Import the whole service first, so a broken tree fails before minutes of embedding.
    import service.api.app  # noqa: F401
    from service.embeddings.encoder import Encoder
    from service.storage.db import start_embedded

    started = time.perf_counter()
    all_samples = load_conversations(data)
    chosen = list(range(len(all_samples))) if conversations is None else list(conversations)
    samples = [all_samples[i] for i in chosen]
    questions = {str(s["sample_id"]): load_qa(s) for s in samples}
    n_questions = sum(len(q) for q in questions.values())
    if conversations is None and n_questions != EXPECTED_QUESTIONS:
        raise RuntimeError(f"{n_questions} questions after cleaning, expected {EXPECTED_QUESTIONS}")
    split_ids = {
        name: {str(all_samples[i]["sample_id"]) for i in ids if i in chosen}
        for name, ids in SPLITS.items()
    }
    split_ids = {name: ids for name, ids in split_ids.items() if ids}
    corpora = {
        "turns": [turn_pool(s) for s in samples],
        "observations": [observation_pool(s) for s in samples],
    }

    _progress("loading the embedding model")
    encoder = Encoder()
    texts = [t for pools in corpora.values() for p in pools for t in p.texts]
    _progress(f"embedding {len(texts)} memory texts")
    t0 = time.perf_counter()
    vectors = _embed_with_cache(encoder, texts, cache_dir)
    embed_s = time.perf_counter() - t0
    offset = 0
    for pools in corpora.values():
        for pool in pools:
            pool.vectors = vectors[offset : offset + len(pool.texts)]
            offset += len(pool.texts)
    # Each question is embedded alone, as the inlet does, and timed: every latency below
    # that uses vectors includes its question's embedding. The vectors are then in the
    # encoder's cache, so the inlet's own block (recall) finds them there.
    question_vectors: dict[str, np.ndarray] = {}
    embed_ms: dict[str, float] = {}
    for q in (q for qs in questions.values() for q in qs):
        if q.question in question_vectors:
            continue
        t0 = time.perf_counter()
        question_vectors[q.question] = encoder.encode_sync([q.question])[0]
        embed_ms[q.question] = (time.perf_counter() - t0) * 1000.0

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="locomo-bench-") as tmp:
        _progress("starting PostgreSQL")
        url, server = start_embedded(Path(tmp))
        try:
            from service.storage import migrate

            migrate.upgrade(url)
            async with service_runtime(url, Path(tmp) / "state", encoder) as rt:
                retrieve, retrieve_name = retrieval_function()
                insert_s = 0.0
                for pools in corpora.values():
                    for pool in pools:
                        insert_s += await insert_pool(rt, pool)
                results["setup"] = {
                    "ours_function": retrieve_name,
                    "embedded_texts": len(texts),
                    "embed_seconds": round(embed_s, 1),
                    "embed_texts_per_s": round(len(texts) / embed_s, 1),
                    "insert_seconds": round(insert_s, 1),
                    "insert_rows_per_s": round(len(texts) / insert_s, 1),
                    "ingest_memories_per_s": round(len(texts) / (embed_s + insert_s), 1),
                    "query_embedding_single": _percentiles(list(embed_ms.values()))
                    | {"n": len(embed_ms)},
                }
                variants = service_variants(rt, retrieve, ablations=ablations)
                results["setup"]["ours_variants"] = {
                    name: {k: (repr(v) if k == "params" else v) for k, v in kwargs.items()}
                    for name, kwargs in variants.items()
                }
                for kind, pools in corpora.items():
                    results[kind] = await _run_corpus(
                        pools,
                        questions,
                        question_vectors,
                        embed_ms,
                        retrieve,
                        rt,
                        variants,
                        kind,
                        per_question,
                        split_ids,
                    )
                hits, misses = getattr(encoder, "hits", None), getattr(encoder, "misses", None)
                results["setup"]["encoder_cache_hits_misses"] = [hits, misses]
        finally:
            server.cleanup()
    results["meta"] = {
        "data": str(data),
        "conversations": chosen,
        "questions": n_questions,
        "splits": {name: sorted(ids) for name, ids in split_ids.items()},
        "split_questions": {
            name: sum(len(questions[c]) for c in ids) for name, ids in split_ids.items()
        },
        "categories": {str(c): CATEGORY_NAMES[c] for c in QA_CATEGORIES},
        "top_k": TOP_K,
        "bm25": {
            "k1": BM25_K1,
            "b": BM25_B,
            "tokens": "[a-z0-9]+, lower-cased, no stemming; bm25: FUNCTION_WORDS removed "
            "(LOCOMO.md reference); bm25_sklearn: sklearn ENGLISH_STOP_WORDS removed",
        },
        "tuned_constants": [list(row) for row in TUNED_CONSTANTS],
        "cpu_count": os.cpu_count(),
        "runtime_s": round(time.perf_counter() - started, 1),
        "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return results


async def _run_corpus(
    pools: Sequence[Pool],
    questions: Mapping[str, Sequence[QAItem]],
    question_vectors: Mapping[str, np.ndarray],
    embed_ms: Mapping[str, float],
    retrieve: Callable[..., Any],
    rt: Any,
    variants: Mapping[str, Mapping[str, Any]],
    kind: str,
    per_question: bool,
    split_ids: Mapping[str, Collection[str]],
) -> dict[str, Any]:
    """Every retriever over one corpus, the intervals and the injected blocks."""

    async def bm25(pool: Pool, q: QAItem) -> list[int]:
        return pool.bm25_top(q.question, TOP_K, FUNCTION_WORDS)

    async def bm25_sklearn(pool: Pool, q: QAItem) -> list[int]:
        return pool.bm25_top(q.question, TOP_K)

    async def dense(pool: Pool, q: QAItem) -> list[int]:
        return pool.dense_top(question_vectors[q.question], TOP_K)

    async def rrf(pool: Pool, q: QAItem) -> list[int]:
        # LOCOMO.md's hybrid: plain reciprocal rank fusion (k = 60) of the two, full lists
        scores: dict[int, float] = {}
        for ranking in (
            pool.bm25_top(q.question, len(pool.texts), FUNCTION_WORDS),
            pool.dense_top(question_vectors[q.question], len(pool.texts)),
        ):
            for rank, index in enumerate(ranking, start=1):
                scores[index] = scores.get(index, 0.0) + 1.0 / (60 + rank)
        return sorted(scores, key=lambda i: (-scores[i], i))[:TOP_K]

    takes_vector = "query_vector" in inspect.signature(retrieve).parameters

    def service(kwargs: Mapping[str, Any]) -> Callable[[Pool, QAItem], Any]:
        async def search(pool: Pool, q: QAItem) -> list[int]:
            extra = dict(kwargs)
            if takes_vector:
                extra["query_vector"] = question_vectors[q.question]
            ranked = await retrieve(
                rt,
                scope=read_scope(pool.owner_id),
                query=q.question,
                now=pool.now,
                limit=TOP_K,
                **extra,
            )
            return [pool.by_memory_id[r.memory.id] for r in ranked[:TOP_K]]

        return search

    for pool in pools:  # build the BM25 indexes outside the timed searches
        pool.bm25_top("warm", 1)
        pool.bm25_top("warm", 1, FUNCTION_WORDS)
    searches: dict[str, tuple[Callable[[Pool, QAItem], Any], bool]] = {
        "bm25": (bm25, False),
        "dense": (dense, True),
        "rrf": (rrf, True),
        "bm25_sklearn": (bm25_sklearn, False),
    } | {name: (service(kwargs), True) for name, kwargs in variants.items()}
    out: dict[str, Any] = {"retrievers": {}}
    records: dict[str, RunRecord] = {}
    for name, (search, uses_vectors) in searches.items():
        _progress(f"{kind}: {name}")
        before = os.getloadavg()[0]
        record = await evaluate(pools, questions, search, embed_ms if uses_vectors else None)
        records[name] = record
        out["retrievers"][name] = _report(
            record, pools, (before, os.getloadavg()[0]), per_question, split_ids
        )
    out["intervals"] = _intervals(records, split_ids)
    out["blocks"] = await _blocks(pools, questions, records, rt, split_ids)
    return out


# -- output -----------------------------------------------------------------------------------

RETRIEVER_LABELS = {
    "bm25": "BM25, function-word stop list (LOCOMO.md reference)",
    "dense": "dense cosine (all-MiniLM-L6-v2)",
    "rrf": "RRF of BM25 and dense (k = 60)",
    "bm25_sklearn": "BM25, scikit-learn stop list",
    "ours": "**ours** (service read path)",
    "ours_no_mmr": "ours without MMR",
    "ours_no_recency": "ours without recency",
    "ours_no_fulltext": "ours without full text",
}
_METRIC_COLUMNS = [*(f"recall@{k}" for k in KS), "hit@10", "ndcg@10", "mrr"]
_SPLIT_TITLES = {
    "5-9": "conversations 5–9 (headline: nothing was tuned on them)",
    "all": "all ten conversations",
    "0-4": "conversations 0–4 (the tuning split)",
}
_KIND_TITLES = {"turns": "dialogue turns", "observations": "the dataset's observation facts"}


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value:.1f} %"


def _quality_tables(block: Mapping[str, Any], split: str) -> list[str]:
    retrievers = block["retrievers"]
    header = ["retriever", *(c.replace("recall", "R") for c in _METRIC_COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * len(_METRIC_COLUMNS)]
    for name, report in retrievers.items():
        overall = report["splits"][split]["overall"]
        cells = [_pct(overall.get(c)) for c in _METRIC_COLUMNS]
        lines.append(f"| {RETRIEVER_LABELS[name]} | " + " | ".join(cells) + " |")
    first = next(iter(retrievers.values()))["splits"][split]["by_category"]
    lines += [
        "",
        "Per category (R@1 / R@5 / R@10 / R@25 / NDCG@10 / MRR):",
        "",
        "| retriever | "
        + " | ".join(f"{c} {CATEGORY_NAMES[c]} (n = {first[str(c)]['n']})" for c in QA_CATEGORIES)
        + " |",
        "|---|" + "---:|" * len(QA_CATEGORIES),
    ]
    for name, report in retrievers.items():
        cells = []
        for c in QA_CATEGORIES:
            row = report["splits"][split]["by_category"][str(c)]
            cells.append(
                " / ".join(
                    f"{row[m]:.1f}" if m in row else "–"
                    for m in ("recall@1", "recall@5", "recall@10", "recall@25", "ndcg@10", "mrr")
                )
            )
        lines.append(f"| {RETRIEVER_LABELS[name]} | " + " | ".join(cells) + " |")
    intervals = block["intervals"][split]
    lines += [
        "",
        "Ours minus each baseline, points, with the bootstrap 95 % interval (2,000 resamples "
        "of the questions, paired):",
        "",
        "| baseline | R@1 | R@10 | MRR |",
        "|---|---:|---:|---:|",
    ]
    for name, row in intervals.items():
        cells = [
            f"{row[m]['diff']:+.1f} [{row[m]['low']:+.1f}, {row[m]['high']:+.1f}]"
            for m in CI_METRICS
        ]
        lines.append(f"| {RETRIEVER_LABELS[name]} | " + " | ".join(cells) + " |")
    return lines


def _block_tables(block: Mapping[str, Any], split: str) -> list[str]:
    blocks = block["blocks"][split]
    lines = [
        "| retriever | " + " | ".join(f"{b} tokens" for b in BUDGETS) + " |",
        "|---|" + "---:|" * len(BUDGETS),
    ]
    for name in (*BASELINES, "ours"):
        cells = [_pct(blocks[str(b)][name]["overall"]) for b in BUDGETS]
        lines.append(f"| {RETRIEVER_LABELS[name]} | " + " | ".join(cells) + " |")
    ours = [blocks[str(b)]["ours"] for b in BUDGETS]
    lines += [
        "| ours, its relevant items alone (without the core memories) | "
        + " | ".join(_pct(o["relevant_items_only"]) for o in ours)
        + " |",
        "| ours: items in the block (of which core memories) | "
        + " | ".join(f"{o['items_mean']:.1f} ({o['core_mean']:.1f})" for o in ours)
        + " |",
        "| ours: tokens of the item lines (mean) | "
        + " | ".join(f"{o['tokens_mean']:.0f}" for o in ours)
        + " |",
        "| ours: facts injected twice (all questions) | "
        + " | ".join(str(o["repeated_facts"]) for o in ours)
        + " |",
        "",
        "At the default budget (400 tokens), per category:",
        "",
        "| retriever | " + " | ".join(f"{c} {CATEGORY_NAMES[c]}" for c in QA_CATEGORIES) + " |",
        "|---|" + "---:|" * len(QA_CATEGORIES),
    ]
    for name in (*BASELINES, "ours"):
        row = blocks["400"][name]["by_category"]
        lines.append(
            f"| {RETRIEVER_LABELS[name]} | "
            + " | ".join(_pct(row[str(c)]) for c in QA_CATEGORIES)
            + " |"
        )
    return lines


def render_markdown(results: Mapping[str, Any]) -> str:
    """The Markdown report of a `run_benchmark` document."""
    meta, setup = results["meta"], results["setup"]
    lines = [
        "# LoCoMo retrieval (protocol of LOCOMO.md, categories 1–4)",
        "",
        f"n = {meta['questions']} questions over conversations {meta['conversations']}; "
        f"top {meta['top_k']} per question; ours = `{setup['ours_function']}`; "
        f"finished {meta['finished']} in {meta['runtime_s']:.0f} s on {meta['cpu_count']} CPUs.",
        "",
    ]
    for split in (s for s in ("5-9", "all") if s in meta["splits"]):
        n = meta["split_questions"][split]
        for kind in ("turns", "observations"):
            lines += [
                f"## {_KIND_TITLES[kind].capitalize()}, {_SPLIT_TITLES[split]} (n = {n})",
                "",
                *_quality_tables(results[kind], split),
                "",
                f"What reaches the model — share of each question's evidence inside the block "
                f"the inlet injects (ours) or the same budget filled best first (baselines), "
                f"{_KIND_TITLES[kind]}, {_SPLIT_TITLES[split]}:",
                "",
                *_block_tables(results[kind], split),
                "",
            ]
    lines += [
        "## Latency, end to end (question embedding included where a retriever uses vectors)",
        "",
        "| retriever | turns p50 / p95 | facts p50 / p95 |",
        "|---|---:|---:|",
    ]
    for name in results["turns"]["retrievers"]:
        cells = []
        for kind in ("turns", "observations"):
            lat = results[kind]["retrievers"][name]["search_latency"]
            cells.append(f"{lat['p50_ms']:.1f} / {lat['p95_ms']:.1f} ms")
        lines.append(f"| {RETRIEVER_LABELS[name]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Constants chosen by looking at LoCoMo",
        "",
        "| constant | value | tried | split |",
        "|---|---|---|---|",
        *(f"| {c} | {v} | {t} | {s} |" for c, v, t, s in meta["tuned_constants"]),
        "",
    ]
    single = setup["query_embedding_single"]
    lines += [
        "## Conditions",
        "",
        f"- Ingest: {setup['embedded_texts']:,} memory texts embedded in "
        f"{setup['embed_seconds']:.0f} s (or read from bench/.work/), stored through "
        f"`service.storage.memories.insert` at {setup['insert_rows_per_s']:.0f} rows/s.",
        f"- Each question is embedded alone, as the inlet does: p50 {single['p50_ms']:.1f} / "
        f"p95 {single['p95_ms']:.1f} ms (n = {single['n']}); the latencies above add that "
        "question's embedding time to every retriever that uses vectors.",
        "- BM25 and dense run in this process over numpy arrays; ours runs SQL against the "
        "embedded PostgreSQL over a unix socket. Latencies are wall time per question after "
        f"{WARMUP_QUERIES} warm-up questions, on a shared 2-core machine.",
        "- LOCOMO.md reference (same protocol): BM25 R@10 57.2 %, dense 45.1 %, RRF 53.8 %, "
        "dense over observations 60.6 %. Published LoCoMo DRAGON over turns (all five "
        "categories): R@10 66.2 %.",
        "",
    ]
    return "\n".join(lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.locomo_retrieval", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA_PATH,
        help="locomo10.json (default: ../shared/data/locomo/locomo10.json)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=DEFAULT_OUT_DIR,
        help="where locomo_retrieval.{json,md,png} go (default: bench/results)",
    )
    parser.add_argument(
        "--ablations",
        action="store_true",
        help="also run ours with MMR, recency and full text switched off in turn",
    )
    parser.add_argument(
        "--per-question",
        action="store_true",
        help="also keep each question's recall@10 and reciprocal rank in the JSON",
    )
    parser.add_argument(
        "--no-vector-cache",
        action="store_true",
        help="embed every memory text again instead of reading bench/.work/",
    )
    parser.add_argument(
        "--conversations",
        type=lambda s: [int(x) for x in s.split(",")],
        default=None,
        help="comma-separated conversation indices (default: all)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and write JSON, Markdown and PNG; prints the Markdown."""
    args = _parse_args(argv)
    results = asyncio.run(
        run_benchmark(
            args.data,
            args.conversations,
            ablations=args.ablations,
            per_question=args.per_question,
            cache_dir=None if args.no_vector_cache else REPO_ROOT / "bench" / ".work",
        )
    )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    base = args.out_dir / "locomo_retrieval"
    base.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    markdown = render_markdown(results)
    base.with_suffix(".md").write_text(markdown, encoding="utf-8")
    from bench.plots import plot_retrieval

    split = "5-9" if "5-9" in results["meta"]["splits"] else "all"
    plot_retrieval(
        {  # the plot reads {kind: {retriever: summary}}: the headline split's
            kind: {
                name: report["splits"][split]
                for name, report in results[kind]["retrievers"].items()
            }
            for kind in ("turns", "observations")
        },
        base.with_suffix(".png"),
        labels=RETRIEVER_LABELS,
        names=("bm25", "dense", "rrf", "ours"),
    )
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
