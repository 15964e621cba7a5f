"""Tune the standard baselines on LoCoMo conversations 0–4 only, and log every cell.

    python -m bench.tune_baselines --data ../shared/data/locomo/locomo10.json

The baselines of `bench.retrieval_sets` get the same effort the read path got, on the same
tuning split (LOCOMO.md: tune on 0–4, report 5–9), separately for dialogue turns and for the
observation facts. Only the pools and questions of conversations 0–4 are loaded: 5–9 cannot
leak into a choice. The grid, in stages (each stage keeps the previous stages' choice):

1. analysis of BM25 (k1 1.2, b 0.75): stop list none / function words / scikit-learn's, each
   with and without the Snowball English stemmer;
2. BM25 k1 × b on the chosen analysis (`K1_GRID` × `B_GRID`);
3. RRF of that BM25 and all-MiniLM-L6-v2 cosine, k in `RRF_K_GRID`;
4. convex fusion of min-max BM25 and min-max cosine, dense weight in `WEIGHT_GRID`.

Every cell is scored by recall@10 over the split's questions (the protocol's headline), ties
broken by MRR, then by the earlier cell (`choose`). Dense cosine has no constant to tune.

Writes `bench/results/baseline_tuning.json` (grid, split, every cell's recall@1 / recall@10 /
MRR, chosen values — read by `bench.retrieval_sets.load_tuned_constants`) and `.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.retrieval_sets import (
    TUNING,
    TUNING_LOG,
    BaselineConfig,
    BM25Ranker,
    ConvexRanker,
    DenseRanker,
    Ranker,
    RetrievalSet,
    RRFRanker,
    embed_sets,
    evaluate,
    locomo_sets,
)

K1_GRID: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.2, 1.5, 2.0)
B_GRID: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 0.9, 1.0)
RRF_K_GRID: tuple[float, ...] = (0.5, 1, 2, 5, 10, 20, 40, 60, 100)
WEIGHT_GRID: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))
ANALYSES: tuple[tuple[str, bool], ...] = tuple(
    (stop, stem) for stop in ("none", "function_words", "sklearn") for stem in (False, True)
)
OBJECTIVE: tuple[str, ...] = ("recall@10", "mrr")
CORPORA = {"locomo_turns": "turns", "locomo_facts": "facts"}
#: The constants each stage varies (the others are the previous stages' choices).
STAGE_KEYS: Mapping[str, tuple[str, ...]] = {
    "1 analysis": ("stop", "stem"),
    "2 k1 x b": ("k1", "b"),
    "3 rrf k": ("rrf_k",),
    "4 convex weight": ("dense_weight",),
}


def choose(cells: Sequence[Mapping[str, Any]], objective: Sequence[str] = OBJECTIVE) -> int:
    """Index of the best cell: highest `objective[0]`, ties by the next metric, then the first.

    Args:
        cells: each {"scores": {metric: value}, ...}, in grid order.

    Raises:
        ValueError: on an empty grid.
    """
    if not cells:
        raise ValueError("an empty grid has no best cell")
    best = 0
    for index, cell in enumerate(cells):
        mine = tuple(cell["scores"][m] for m in objective)
        theirs = tuple(cells[best]["scores"][m] for m in objective)
        if mine > theirs:
            best = index
    return best


async def _score(ranker: Ranker, dataset: RetrievalSet) -> dict[str, float]:
    result = await evaluate(ranker, dataset, budgets=())
    return result.means


async def tune_corpus(dataset: RetrievalSet) -> dict[str, Any]:
    """The four stages over one tuning set; returns every stage's cells and the choices."""
    stages: dict[str, list[dict[str, Any]]] = {}

    async def stage(name: str, configs: Sequence[BaselineConfig], make: Any) -> BaselineConfig:
        cells = []
        for config in configs:
            scores = await _score(make(config), dataset)
            cells.append({"config": dataclasses.asdict(config), "scores": scores})
        stages[name] = cells
        best = choose(cells)
        print(f"{dataset.name} {name}: {cells[best]}", file=sys.stderr, flush=True)
        return configs[best]

    base = BaselineConfig()
    analysis = await stage(
        "1 analysis",
        [dataclasses.replace(base, stop=s, stem=t) for s, t in ANALYSES],
        BM25Ranker,
    )
    bm25 = await stage(
        "2 k1 x b",
        [dataclasses.replace(analysis, k1=k1, b=b) for k1 in K1_GRID for b in B_GRID],
        BM25Ranker,
    )
    rrf = await stage(
        "3 rrf k", [dataclasses.replace(bm25, rrf_k=k) for k in RRF_K_GRID], RRFRanker
    )
    convex = await stage(
        "4 convex weight",
        [dataclasses.replace(bm25, dense_weight=w) for w in WEIGHT_GRID],
        ConvexRanker,
    )
    dense = await _score(DenseRanker(), dataset)
    return {
        "questions": len(dataset.questions),
        "stages": stages,
        "dense": dense,
        "chosen": {
            "bm25": dataclasses.asdict(bm25),
            "rrf": dataclasses.asdict(rrf),
            "convex": dataclasses.asdict(convex),
        },
    }


def render_markdown(log: Mapping[str, Any]) -> str:
    """The chosen constants and each stage's best cell, per corpus."""
    lines = [
        "# Baseline tuning on LoCoMo conversations 0–4",
        "",
        f"Split: conversations {log['split']} only; objective {' then '.join(log['objective'])}"
        f"; finished {log['finished']} in {log['runtime_s']:.0f} s. Every cell is in "
        "`baseline_tuning.json`.",
        "",
    ]
    for corpus, doc in log["corpora"].items():
        lines += [
            f"## {corpus} (n = {doc['questions']})",
            "",
            "| stage (BM25 k1 1.2, b 0.75 until stage 2) | cells | chosen | R@1 | R@10 | MRR |",
            "|---|---:|---|---:|---:|---:|",
        ]
        for name, cells in doc["stages"].items():
            best = cells[choose(cells)]
            c, s = best["config"], best["scores"]
            text = ", ".join(f"{key} {c[key]}" for key in STAGE_KEYS[name])
            lines.append(
                f"| {name} | {len(cells)} | {text} | {s['recall@1']:.1f} | "
                f"{s['recall@10']:.1f} | {s['mrr']:.1f} |"
            )
        d = doc["dense"]
        lines += [
            f"| dense cosine | 1 | – | {d['recall@1']:.1f} | {d['recall@10']:.1f} | "
            f"{d['mrr']:.1f} |",
            "",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Tune on 0–4, write the log's JSON and Markdown, print the Markdown."""
    parser = argparse.ArgumentParser(prog="python -m bench.tune_baselines")
    parser.add_argument(
        "--data", type=Path, required=True, help="locomo10.json (../shared/data/locomo/)"
    )
    parser.add_argument("--out", type=Path, default=TUNING_LOG)
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"error: {args.data} does not exist", file=sys.stderr)
        return 2
    started = time.perf_counter()
    sets = locomo_sets(args.data, TUNING)
    embed_sets(sets)
    corpora = {CORPORA[name]: asyncio.run(tune_corpus(s)) for name, s in sets.items()}
    log = {
        "split": list(TUNING),
        "objective": list(OBJECTIVE),
        "grid": {
            "analyses": [list(a) for a in ANALYSES],
            "k1": list(K1_GRID),
            "b": list(B_GRID),
            "rrf_k": list(RRF_K_GRID),
            "dense_weight": list(WEIGHT_GRID),
        },
        "corpora": corpora,
        "chosen": {corpus: doc["chosen"] for corpus, doc in corpora.items()},
        "runtime_s": round(time.perf_counter() - started, 1),
        "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(log, indent=1) + "\n", encoding="utf-8")
    markdown = render_markdown(log)
    args.out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
