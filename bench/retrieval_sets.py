r"""Retrieval on three data sets — LoCoMo, PrefEval, multilingual — ours against tuned baselines.

    python -m bench.retrieval_sets --locomo ../shared/data/locomo/locomo10.json \
        --prefeval ../shared/data/prefeval

Measuring a read-path lever on every set from Python (one call per set)::

    import asyncio
    from bench import retrieval_sets as rs

    sets = rs.load_sets(locomo=Path(...), prefeval=Path(...))   # {name: RetrievalSet}
    encoder = rs.embed_sets(sets)                   # vectors (cached in bench/.work/)
    constants = rs.load_tuned_constants()           # bench/results/baseline_tuning.json

    async def measure():
        async with rs.service(encoder) as rt:       # embedded PostgreSQL + the Runtime
            ours = rs.ServiceRanker(rt)             # or params=dataclasses.replace(
            for name, dataset in sets.items():      #   rt.ranking_params(), ...): a lever
                await ours.add(dataset)
                mine = await rs.evaluate(ours, dataset)
                base = [await rs.evaluate(r, dataset)
                        for r in rs.baseline_rankers(constants[dataset.corpus])]
                print(name, mine.means, rs.compare(mine, base))

    asyncio.run(measure())

`evaluate(ranker, dataset)` returns an `Evaluation`: per question and as means (percent), the
metrics `METRICS` — recall@1, recall@10, MRR and the share of the question's evidence inside
the block at each token budget of the set. A ranker is anything with `name`, `rank(pool,
question) -> indices best first` and `block(pool, question, budget) -> injected indices`
(`Ranker`, whose default block fills the budget best first with the inlet's rendered lines,
as `bench.locomo_retrieval.block_coverage` does). `compare(ours, baselines)` gives ours minus
the best baseline per metric with a paired bootstrap 95 % interval and a verdict (a tie when
the interval holds 0).

The sets (`load_sets`):

- `locomo_turns`, `locomo_facts`: LoCoMo conversations 5–9 (the held-out split; the baselines
  were tuned on 0–4 by `bench.tune_baselines`), pools and questions as in
  `bench.locomo_retrieval` (turn texts, observation facts), budgets 200 / 400 / 800 tokens.
- `prefeval_explicit_20`, `prefeval_explicit_1`: PrefEval's 1,000 explicit preferences
  (Zhao et al., ICLR 2025) dealt to 20 users (≈ 50 each, every topic shared evenly, seed 0),
  or all held by one user; each preference's question is asked of its holder; one relevant
  memory per question. Budget 400 tokens.
- `prefeval_implicit_20`, `prefeval_implicit_1`: the same pairs from PrefEval's choice-based
  implicit set, where the memory is the user's own selection turn (`conversation.
  user_selection`, e.g. "I think I'll go with The Westin … the other options seem a bit too
  lively for my taste"): the preference is never stated. Budget 400 tokens.
- `multilingual`: `bench/multilingual_facts.json` (one user's German, Spanish and French facts,
  questions in the same, another or English language). Budget 400 tokens.

The baselines keep the constants chosen on LoCoMo 0–4 untouched on every set: the turn
constants on `locomo_turns`, the fact constants everywhere else (preferences and the
multilingual facts are short standalone statements, like LoCoMo's observation facts).

Results: `bench/results/retrieval_sets/<set>.json` and `bench/results/retrieval_sets.md`.
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import REPO_ROOT, load_conversations, load_qa
from bench.locomo_retrieval import (
    FUNCTION_WORDS,
    Pool,
    _embed_with_cache,
    _scrubbed_environment,
    bootstrap_difference,
    insert_pool,
    observation_pool,
    read_scope,
    recall_at_k,
    reciprocal_rank,
    service_runtime,
    turn_pool,
)

__all__ = [
    "METRICS",
    "BM25Ranker",
    "BaselineConfig",
    "ConvexRanker",
    "DenseRanker",
    "Evaluation",
    "Question",
    "RRFRanker",
    "Ranker",
    "RetrievalSet",
    "ServiceRanker",
    "analyse",
    "baseline_rankers",
    "compare",
    "evaluate",
    "fill_block",
    "load_sets",
    "load_tuned_constants",
    "question_metrics",
    "service",
    "verdict",
]

OUT_DIR = REPO_ROOT / "bench" / "results" / "retrieval_sets"
TUNING_LOG = REPO_ROOT / "bench" / "results" / "baseline_tuning.json"
MULTILINGUAL = REPO_ROOT / "bench" / "multilingual_facts.json"
#: Memories returned per question (LOCOMO.md step 2).
TOP_K = 50
#: LoCoMo's held-out conversations (LOCOMO.md: tune on 0–4, report 5–9).
HELD_OUT = (5, 6, 7, 8, 9)
TUNING = (0, 1, 2, 3, 4)
#: Users PrefEval's 1,000 pairs are dealt to in the "many users" setting (≈ 50 each).
PREFEVAL_USERS = 20
PREFEVAL_SEED = 0
#: MEMORY_CONTEXT_DEADLINE_S during the bench (the setting's maximum, service/config.py).
CONTEXT_DEADLINE_S = 30.0
#: Query time of the PrefEval and multilingual pools (their memories are a day older).
NOW = datetime(2025, 1, 2, tzinfo=UTC)


# -- analysis (tokens for BM25) ----------------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+")
STOP_LISTS: Mapping[str, frozenset[str]] = {"none": frozenset(), "function_words": FUNCTION_WORDS}


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def analyse(text: str, *, stop: str = "function_words", stem: bool = True) -> list[str]:
    """BM25 tokens: lower-cased `[a-z0-9]+` runs, stop words dropped, then Snowball-stemmed.

    Args:
        stop: a `STOP_LISTS` key ("none" or "function_words", the short English list of
            `bench.locomo_retrieval.FUNCTION_WORDS`) or "sklearn" (scikit-learn's 318 words).
        stem: apply the Snowball English stemmer (the `snowballstemmer` package).
    """
    if stop == "sklearn":
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        words: Collection[str] = ENGLISH_STOP_WORDS
    else:
        words = STOP_LISTS[stop]
    tokens = [t for t in _TOKEN.findall(text.lower()) if t not in words]
    return list(_stemmer().stemWords(tokens)) if stem else tokens


# -- data --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One question, asked of one pool."""

    pool: int  #: index into `RetrievalSet.pools`
    text: str  #: verbatim
    evidence: frozenset[str]  #: ids a relevant memory covers (one for PrefEval / multilingual)
    group: str  #: conversation id, LoCoMo category, or the multilingual kind of question
    key: str  #: a stable id of the question within its set


@dataclass
class RetrievalSet:
    """Pools of memories and the questions asked of them."""

    name: str
    description: str
    pools: list[Pool]
    questions: list[Question]
    corpus: str  #: "turns" or "facts": which LoCoMo-tuned baseline constants apply
    budgets: tuple[int, ...] = (400,)  #: token budgets of the measured block
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  #: question text → vector


def locomo_sets(data: Path, conversations: Sequence[int] = HELD_OUT) -> dict[str, RetrievalSet]:
    """`locomo_turns` and `locomo_facts` over `conversations` (indices into locomo10.json)."""
    samples = load_conversations(data)
    chosen = [samples[i] for i in conversations]
    out: dict[str, RetrievalSet] = {}
    for name, corpus, build in (
        ("locomo_turns", "turns", turn_pool),
        ("locomo_facts", "facts", observation_pool),
    ):
        pools = [build(s) for s in chosen]
        questions = [
            Question(
                pool=p,
                text=q.question,
                evidence=frozenset(q.evidence),
                group=f"{pools[p].conversation_id}/c{q.category}",
                key=f"{pools[p].conversation_id}#{q.index}",
            )
            for p, sample in enumerate(chosen)
            for q in load_qa(sample)
        ]
        out[name] = RetrievalSet(
            name=name,
            description=f"LoCoMo {corpus}, conversations {list(conversations)}",
            pools=pools,
            questions=questions,
            corpus=corpus,
            budgets=(200, 400, 800),
        )
    return out


def prefeval_rows(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """(key "<topic>#<index>", record) of every topic file in `folder`, topics sorted by name.

    Raises:
        FileNotFoundError: when `folder` holds no `*.json` topic file.
    """
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no PrefEval topic files (*.json) in {folder}")
    return [
        (f"{path.stem}#{i}", row)
        for path in files
        for i, row in enumerate(json.loads(path.read_text(encoding="utf-8")))
    ]


def prefeval_set(
    name: str,
    rows: Sequence[tuple[str, Mapping[str, Any]]],
    memory_text: Callable[[Mapping[str, Any]], str],
    *,
    users: int,
    seed: int = PREFEVAL_SEED,
) -> RetrievalSet:
    """PrefEval pairs dealt to `users` users; each question is asked of its preference's holder.

    Each topic's pairs are shuffled with `random.Random(seed)` and dealt round robin, topic
    after topic, so users hold equally many (± 1) and each topic is shared out evenly.
    """
    rng = random.Random(seed)
    by_topic: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for key, row in rows:
        by_topic.setdefault(key.split("#")[0], []).append((key, row))
    dealt: list[list[tuple[str, Mapping[str, Any]]]] = [[] for _ in range(users)]
    position = 0
    for topic in sorted(by_topic):
        items = list(by_topic[topic])
        rng.shuffle(items)
        for item in items:
            dealt[position % users].append(item)
            position += 1
    pools, questions = [], []
    for number, items in enumerate(dealt):
        owner = f"{name}-user-{number}"
        pools.append(
            Pool(
                conversation_id=owner,
                kind="preferences",
                owner_id=owner,
                texts=[memory_text(row) for _, row in items],
                covers=[frozenset({key}) for key, _ in items],
                dates=[NOW - timedelta(days=1)] * len(items),
                now=NOW,
            )
        )
        questions += [
            Question(number, str(row["question"]), frozenset({key}), key.split("#")[0], key)
            for key, row in items
        ]
    return RetrievalSet(
        name=name,
        description=f"PrefEval, {len(rows)} pairs dealt to {users} user(s)",
        pools=pools,
        questions=questions,
        corpus="facts",
    )


def multilingual_set(path: Path = MULTILINGUAL) -> RetrievalSet:
    """`bench/multilingual_facts.json` as one user's pool; a question's group is its kind."""
    data = json.loads(path.read_text(encoding="utf-8"))
    facts = data["facts"]
    pool = Pool(
        conversation_id="multilingual",
        kind="facts",
        owner_id="retrieval-sets-multilingual",
        texts=[f["text"] for f in facts],
        covers=[frozenset({f["id"]}) for f in facts],
        dates=[NOW - timedelta(days=1)] * len(facts),
        now=NOW,
    )
    questions = [
        Question(0, q["q"], frozenset({q["fact"]}), q["kind"], f"q{i}")
        for i, q in enumerate(data["questions"])
    ]
    return RetrievalSet(
        name="multilingual",
        description=f"{len(facts)} facts in de/es/fr/it/pt, {len(questions)} questions",
        pools=[pool],
        questions=questions,
        corpus="facts",
    )


def load_sets(
    *, locomo: Path | None, prefeval: Path | None, multilingual: Path | None = MULTILINGUAL
) -> dict[str, RetrievalSet]:
    """Every set whose data is given (None skips it); not yet embedded (`embed_sets`)."""
    out: dict[str, RetrievalSet] = {}
    if locomo is not None:
        out |= locomo_sets(locomo)
    if prefeval is not None:
        explicit = prefeval_rows(prefeval / "explicit_preference")
        implicit = prefeval_rows(prefeval / "implicit_preference" / "choice-based")
        for users in (PREFEVAL_USERS, 1):
            out[f"prefeval_explicit_{users}"] = prefeval_set(
                f"prefeval_explicit_{users}", explicit, lambda r: str(r["preference"]), users=users
            )
        for users in (PREFEVAL_USERS, 1):
            out[f"prefeval_implicit_{users}"] = prefeval_set(
                f"prefeval_implicit_{users}",
                implicit,
                lambda r: str(r["conversation"]["user_selection"]),
                users=users,
            )
    if multilingual is not None:
        out["multilingual"] = multilingual_set(multilingual)
    return out


def embed_sets(
    sets: Mapping[str, RetrievalSet], encoder: Any = None, cache_dir: Path | None = None
) -> Any:
    """Fill every pool's vectors and every set's question vectors; returns the encoder.

    Memory texts go through `bench/.work/` (`_embed_with_cache`); questions are embedded one
    call for all (each is a separate sequence: the vectors are those of a lone question).
    """
    if encoder is None:
        from service.embeddings.encoder import Encoder

        encoder = Encoder()
    texts = [t for s in sets.values() for p in s.pools for t in p.texts]
    texts += [q.text for s in sets.values() for q in s.questions]
    vectors = _embed_with_cache(encoder, texts, cache_dir or REPO_ROOT / "bench" / ".work")
    by_text = dict(zip(texts, vectors, strict=True))
    for s in sets.values():
        for pool in s.pools:
            pool.vectors = np.stack([by_text[t] for t in pool.texts]).astype(np.float32)
        s.vectors = {q.text: by_text[q.text] for q in s.questions}
    return encoder


# -- metrics -----------------------------------------------------------------------------------


def fill_block(ranked: Sequence[int], costs: Sequence[int], budget_tokens: int) -> list[int]:
    """Indices the inlet's rule takes from `ranked` into a block of `budget_tokens`.

    An item is taken while its rendered line fits what is left of the budget, else skipped (a
    shorter one after it may still fit) — `bench.locomo_retrieval.block_coverage`'s rule.
    """
    spent, taken = 0, []
    for index in ranked:
        if spent + costs[index] <= budget_tokens:
            spent += costs[index]
            taken.append(index)
    return taken


def question_metrics(
    covers: Sequence[Collection[str]],
    ranked: Sequence[int],
    blocks: Mapping[int, Sequence[int]],
    evidence: Collection[str],
) -> dict[str, float]:
    """recall@1, recall@10, mrr and `block@<budget>` (evidence share in the block), in [0, 1].

    Args:
        covers: ids each memory of the pool covers, by index.
        ranked: memory indices best first.
        blocks: budget (tokens) → indices of the memories injected at that budget.
        evidence: the question's evidence ids (at least one).
    """
    listed = [covers[i] for i in ranked]
    out = {
        "recall@1": recall_at_k(listed, evidence, 1),
        "recall@10": recall_at_k(listed, evidence, 10),
        "mrr": reciprocal_rank(listed, evidence),
    }
    for budget, taken in sorted(blocks.items()):
        out[f"block@{budget}"] = recall_at_k([covers[i] for i in taken], evidence, len(taken))
    return out


METRICS: tuple[str, ...] = ("recall@1", "recall@10", "mrr", "block@200", "block@400", "block@800")


def line_costs(pool: Pool) -> list[int]:
    """Tokens of each memory's rendered line `- [YYYY-MM-DD] text` (the inlet's estimate)."""
    from service.core.tokens import estimate_tokens

    return [
        estimate_tokens(f"- [{d:%Y-%m-%d}] {t}")
        for t, d in zip(pool.texts, pool.dates, strict=True)
    ]


class Ranker(abc.ABC):
    """A retriever under evaluation: `rank` is required, `block` defaults to a budget fill."""

    name = "ranker"

    @abc.abstractmethod
    async def rank(self, dataset: RetrievalSet, pool: Pool, question: Question) -> list[int]:
        """Memory indices of `pool`, best first (at most `TOP_K`)."""

    async def block(
        self,
        dataset: RetrievalSet,  # noqa: ARG002 (the Ranker interface)
        pool: Pool,
        question: Question,  # noqa: ARG002 (the Ranker interface)
        budget: int,
        ranked: Sequence[int],
    ) -> list[int]:
        """Indices injected at `budget` tokens: `ranked` filled best first (`fill_block`)."""
        costs = _COSTS.get(id(pool))
        if costs is None:
            costs = _COSTS[id(pool)] = line_costs(pool)
        return fill_block(ranked, costs, budget)


_COSTS: dict[int, list[int]] = {}  # id(pool) → line_costs(pool): pools live for the whole run


@dataclass
class Evaluation:
    """One ranker over one set."""

    ranker: str
    dataset: str
    per_question: dict[str, list[float]]  #: metric → value in [0, 1] per question, set order
    seconds: float

    @property
    def means(self) -> dict[str, float]:
        """Metric → mean in percent, rounded to 0.1."""
        return {m: round(100.0 * float(np.mean(v)), 1) for m, v in self.per_question.items()}


async def evaluate(
    ranker: Ranker, dataset: RetrievalSet, budgets: Sequence[int] | None = None
) -> Evaluation:
    """Every question of `dataset` through `ranker`: per-question metrics and their means."""
    started = time.perf_counter()
    per_question: dict[str, list[float]] = {}
    for question in dataset.questions:
        pool = dataset.pools[question.pool]
        ranked = (await ranker.rank(dataset, pool, question))[:TOP_K]
        blocks = {
            b: await ranker.block(dataset, pool, question, b, ranked)
            for b in (dataset.budgets if budgets is None else budgets)
        }
        for metric, value in question_metrics(
            pool.covers, ranked, blocks, question.evidence
        ).items():
            per_question.setdefault(metric, []).append(value)
    return Evaluation(ranker.name, dataset.name, per_question, time.perf_counter() - started)


def verdict(interval: Mapping[str, float]) -> str:
    """Verdict: "better" when the 95 % interval is above 0, "worse" when below, else "tie"."""
    if interval["low"] > 0:
        return "better"
    if interval["high"] < 0:
        return "worse"
    return "tie"


def compare(ours: Evaluation, baselines: Sequence[Evaluation]) -> dict[str, Any]:
    """Per metric: the best baseline on this set (highest mean), ours minus it, interval, verdict.

    The best baseline is picked on the reported questions themselves, per metric: the
    strongest opponent each figure could have, so the comparison never flatters ours.
    """
    out: dict[str, Any] = {}
    for metric, mine in ours.per_question.items():
        best = max(baselines, key=lambda e: float(np.mean(e.per_question[metric])))
        interval = bootstrap_difference(mine, best.per_question[metric])
        out[metric] = {
            "ours": ours.means[metric],
            "best_baseline": best.ranker,
            "best": best.means[metric],
            **interval,
            "verdict": verdict(interval),
        }
    return out


# -- baselines ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineConfig:
    """One baseline's constants (the tuning log's cell)."""

    stop: str = "function_words"  #: see `analyse`
    stem: bool = True
    k1: float = 1.2
    b: float = 0.75
    rrf_k: float = 60.0
    dense_weight: float = 0.5  #: convex fusion: w · minmax(cosine) + (1 − w) · minmax(BM25)


class _Indexes:
    """rank-bm25 indexes per (pool, analysis); k1 and b are set per query (idf ignores them)."""

    def __init__(self) -> None:
        self._by: dict[tuple[int, str, bool], Any] = {}

    def scores(self, pool: Pool, text: str, config: BaselineConfig) -> np.ndarray:
        from rank_bm25 import BM25Okapi

        key = (id(pool), config.stop, config.stem)
        index = self._by.get(key)
        if index is None:
            tokens = [
                analyse(t, stop=config.stop, stem=config.stem) or ["\x00"] for t in pool.texts
            ]
            index = self._by[key] = BM25Okapi(tokens)
        index.k1, index.b = config.k1, config.b
        return np.asarray(
            index.get_scores(analyse(text, stop=config.stop, stem=config.stem)), dtype=float
        )


_INDEXES = _Indexes()


def _order(scores: np.ndarray) -> list[int]:
    return [int(i) for i in np.argsort(-scores, kind="stable")[:TOP_K]]


def _minmax(scores: np.ndarray) -> np.ndarray:
    low, high = float(scores.min()), float(scores.max())
    return np.zeros_like(scores) if high <= low else (scores - low) / (high - low)


class BM25Ranker(Ranker):
    """Okapi BM25 (rank-bm25) over `analyse` tokens."""

    def __init__(self, config: BaselineConfig, name: str = "bm25") -> None:
        self.config, self.name = config, name

    def scores(self, pool: Pool, question: Question) -> np.ndarray:
        return _INDEXES.scores(pool, question.text, self.config)

    async def rank(self, dataset: RetrievalSet, pool: Pool, question: Question) -> list[int]:  # noqa: ARG002 (the Ranker interface)
        return _order(self.scores(pool, question))


class DenseRanker(Ranker):
    """Exact cosine with the set's vectors (all-MiniLM-L6-v2, unit length)."""

    name = "dense"

    async def rank(self, dataset: RetrievalSet, pool: Pool, question: Question) -> list[int]:
        return _order(pool.vectors @ dataset.vectors[question.text])


class RRFRanker(Ranker):
    """Reciprocal rank fusion of the full BM25 and cosine rankings: Σ 1 / (k + rank)."""

    def __init__(self, config: BaselineConfig, name: str = "rrf") -> None:
        self.config, self.name = config, name

    async def rank(self, dataset: RetrievalSet, pool: Pool, question: Question) -> list[int]:
        fused = np.zeros(len(pool.texts))
        for scores in (
            _INDEXES.scores(pool, question.text, self.config),
            pool.vectors @ dataset.vectors[question.text],
        ):
            ranks = np.empty(len(scores))
            ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
            fused += 1.0 / (self.config.rrf_k + ranks)
        return _order(fused)


class ConvexRanker(Ranker):
    """Convex fusion of min-max normalised scores: w · cosine + (1 − w) · BM25."""

    def __init__(self, config: BaselineConfig, name: str = "convex") -> None:
        self.config, self.name = config, name

    async def rank(self, dataset: RetrievalSet, pool: Pool, question: Question) -> list[int]:
        w = self.config.dense_weight
        fused = w * _minmax(pool.vectors @ dataset.vectors[question.text]) + (1 - w) * _minmax(
            _INDEXES.scores(pool, question.text, self.config)
        )
        return _order(fused)


def load_tuned_constants(path: Path = TUNING_LOG) -> dict[str, dict[str, BaselineConfig]]:
    """Map corpus ("turns" / "facts") → baseline name → its chosen `BaselineConfig`.

    Raises:
        FileNotFoundError: when the tuning log is missing (run `python -m bench.tune_baselines`).
    """
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run python -m bench.tune_baselines first")
    log = json.loads(path.read_text(encoding="utf-8"))
    return {
        corpus: {name: BaselineConfig(**cell) for name, cell in chosen.items()}
        for corpus, chosen in log["chosen"].items()
    }


def baseline_rankers(chosen: Mapping[str, BaselineConfig]) -> list[Ranker]:
    """The tuned baselines of one corpus: BM25, dense, RRF, convex fusion."""
    return [
        BM25Ranker(chosen["bm25"], "bm25 (tuned)"),
        DenseRanker(),
        RRFRanker(chosen["rrf"], "rrf (tuned)"),
        ConvexRanker(chosen["convex"], "convex (tuned)"),
    ]


# -- the read path -----------------------------------------------------------------------------


class ServiceRanker(Ranker):
    """The service's read path: `retrieve` (no gate, top 50) and the inlet's block (`recall`).

    `params` (a `RankingParams`) replaces the runtime's ranking parameters for `rank`, so a
    lever can be measured; the block is always the inlet's own (`service.flows.context.recall`
    with the runtime's settings).
    """

    name = "ours"

    def __init__(self, rt: Any, params: Any = None, name: str = "ours") -> None:
        self.rt, self.params, self.name = rt, params, name

    async def add(self, dataset: RetrievalSet) -> None:
        """Store every pool of `dataset` (owner ids are prefixed by the set's name)."""
        for pool in dataset.pools:
            if not pool.owner_id.startswith(dataset.name):
                pool.owner_id = f"{dataset.name}-{pool.owner_id}"
            await insert_pool(self.rt, pool)

    async def rank(self, dataset: RetrievalSet, pool: Pool, question: Question) -> list[int]:
        from service.flows import context

        ranked = await context.retrieve(
            self.rt,
            scope=read_scope(pool.owner_id),
            query=question.text,
            now=pool.now,
            limit=TOP_K,
            params=self.params,
            apply_gate=False,
            query_vector=dataset.vectors[question.text],
        )
        return [pool.by_memory_id[r.memory.id] for r in ranked]

    async def block(
        self,
        dataset: RetrievalSet,  # noqa: ARG002 (the Ranker interface)
        pool: Pool,
        question: Question,
        budget: int,
        ranked: Sequence[int],  # noqa: ARG002 (the Ranker interface)
    ) -> list[int]:
        from service.core.records import ChatContext, ChatKind
        from service.flows import context

        chat = ChatContext(user_id=pool.owner_id, kind=ChatKind.SAVED, chat_id="bench")
        result = await context.recall(
            self.rt, chat=chat, message=question.text, budget_tokens=budget, now=pool.now
        )
        return [pool.by_memory_id[m.memory.id] for m in result.items]


@contextlib.asynccontextmanager
async def service(encoder: Any) -> AsyncIterator[Any]:
    """A migrated embedded PostgreSQL and the service's `Runtime` on it (no workers)."""
    from service.storage import migrate
    from service.storage.db import start_embedded

    _scrubbed_environment()
    # Quality, not latency, is measured: on a loaded machine the inlet's 0.5 s deadline would
    # replace a few blocks by the cached profile, so the bench allows the setting's maximum.
    os.environ["MEMORY_CONTEXT_DEADLINE_S"] = str(CONTEXT_DEADLINE_S)
    with tempfile.TemporaryDirectory(prefix="retrieval-sets-") as tmp:
        url, server = start_embedded(Path(tmp))
        try:
            migrate.upgrade(url)
            async with service_runtime(url, Path(tmp) / "state", encoder) as rt:
                yield rt
        finally:
            server.cleanup()


# -- running -----------------------------------------------------------------------------------


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def run(sets: Mapping[str, RetrievalSet], encoder: Any) -> dict[str, Any]:
    """Ours and every tuned baseline over `sets`; one JSON document per set."""
    constants = load_tuned_constants()
    out: dict[str, Any] = {}
    async with service(encoder) as rt:
        ours = ServiceRanker(rt)
        for name, dataset in sets.items():
            await ours.add(dataset)
            evaluations = []
            for ranker in (*baseline_rankers(constants[dataset.corpus]), ours):
                _progress(f"{name}: {ranker.name}")
                evaluations.append(await evaluate(ranker, dataset))
            mine, baselines = evaluations[-1], evaluations[:-1]
            out[name] = {
                "set": name,
                "description": dataset.description,
                "questions": len(dataset.questions),
                "memories": sum(len(p.texts) for p in dataset.pools),
                "pools": len(dataset.pools),
                "budgets": list(dataset.budgets),
                "baseline_constants": {
                    key: value.__dict__ for key, value in constants[dataset.corpus].items()
                },
                "constants_from": f"LoCoMo 0–4, {dataset.corpus} (baseline_tuning.json)",
                "means": {e.ranker: e.means for e in evaluations},
                "seconds": {e.ranker: round(e.seconds, 1) for e in evaluations},
                "ours_minus_best": compare(mine, baselines),
                "per_question_keys": [q.key for q in dataset.questions],
                "per_question": {e.ranker: e.per_question for e in evaluations},
            }
    return out


_LABELS = {"recall@1": "R@1", "recall@10": "R@10", "mrr": "MRR"}


SET_ORDER: tuple[str, ...] = (
    "locomo_turns",
    "locomo_facts",
    "prefeval_explicit_20",
    "prefeval_explicit_1",
    "prefeval_implicit_20",
    "prefeval_implicit_1",
    "multilingual",
)


def render_markdown(results: Mapping[str, Any]) -> str:
    """One table per set: every retriever's means, then ours minus the best baseline."""
    lines = [
        "# Retrieval on three sets: ours against the tuned baselines",
        "",
        "Baselines tuned on LoCoMo conversations 0–4 only (`bench/results/baseline_tuning.md`) "
        "and applied untouched here. Differences are ours minus the best baseline on that "
        "metric and set, points, paired bootstrap 95 % interval (2,000 resamples of the "
        "questions); a tie when the interval holds 0. Cells in %.",
        "",
    ]
    names = [n for n in SET_ORDER if n in results] + sorted(set(results) - set(SET_ORDER))
    for name in names:
        doc = results[name]
        metrics = list(doc["ours_minus_best"])
        heads = [_LABELS.get(m, m.replace("block@", "block ") + " tok") for m in metrics]
        lines += [
            f"## {name}: {doc['description']} (n = {doc['questions']}, "
            f"{doc['memories']} memories; {sum(doc['seconds'].values()):.0f} s, "
            f"finished {doc.get('finished', '?')})",
            "",
            "| retriever | " + " | ".join(heads) + " |",
            "|---|" + "---:|" * len(metrics),
        ]
        for ranker, means in doc["means"].items():
            label = "**ours**" if ranker == "ours" else ranker
            lines.append(f"| {label} | " + " | ".join(f"{means[m]:.1f}" for m in metrics) + " |")
        cells = [
            f"{c['diff']:+.1f} [{c['low']:+.1f}, {c['high']:+.1f}] {c['verdict']} "
            f"(vs {c['best_baseline']})"
            for c in doc["ours_minus_best"].values()
        ]
        lines += ["| ours − best | " + " | ".join(cells) + " |", ""]
    return "\n".join(lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.retrieval_sets", description=__doc__.split("\n\n")[0]
    )
    shared = REPO_ROOT.parent / "shared" / "data"
    parser.add_argument("--locomo", type=Path, default=shared / "locomo" / "locomo10.json")
    parser.add_argument("--prefeval", type=Path, default=shared / "prefeval")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument(
        "--sets", type=lambda s: s.split(","), default=None, help="comma-separated set names"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sets, write `<out-dir>/<set>.json` and `<out-dir>.md` (every set on disk)."""
    args = _parse_args(argv)
    for path in (args.locomo, args.prefeval):
        if not path.exists():
            print(f"error: {path} does not exist (pass --locomo / --prefeval)", file=sys.stderr)
            return 2
    started = time.perf_counter()
    sets = load_sets(locomo=args.locomo, prefeval=args.prefeval)
    if args.sets:
        sets = {n: s for n, s in sets.items() if n in args.sets}
    _progress(f"embedding {len(sets)} sets")
    encoder = embed_sets(sets)
    results = asyncio.run(run(sets, encoder))
    runtime = round(time.perf_counter() - started, 1)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, doc in results.items():
        doc["finished"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        doc["run_seconds"] = runtime  # the whole invocation: embedding, PostgreSQL, every set
        (args.out_dir / f"{name}.json").write_text(json.dumps(doc) + "\n", encoding="utf-8")
    # the table covers every set on disk, so a run of a few sets (--sets) keeps the others
    every = {
        path.stem: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(args.out_dir.glob("*.json"))
    }
    markdown = render_markdown(every)
    args.out_dir.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
