"""Message-adaptive read-path levers on all seven retrieval sets, tuning and held-out halves.

    python -m bench.levers_adaptive --locomo ../shared/data/locomo/locomo10.json \
        --prefeval ../shared/data/prefeval

Each variant is a set of `RankingParams` overrides (`VARIANTS`), measured through the real
read path (`bench.retrieval_sets.ServiceRanker`: `service.flows.context.retrieve` for the
ranking, `service.flows.context.recall` for the block at 400 tokens) with
`bench.retrieval_sets.evaluate`. The halves:

- tuning: LoCoMo conversations 0–4, PrefEval users 0–9 of the 20-user deals, the one-user
  sets' even-numbered questions;
- held out: LoCoMo 5–9, PrefEval users 10–19, odd-numbered questions; the multilingual set
  is reported whole and never tuned on.

The candidate lists of a query do not depend on the ranking parameters, so the statement's
result (`service.flows.candidates.gather`) is kept per (scope, query) for the run: every
variant after the first costs the fusion, gate, MMR and block only. Per set and half: the
means of each variant, its difference with `current` (the defaults of main) and with the
best tuned baseline (paired bootstrap 95 % intervals), and the block's noise (mean injected
items and tokens). Results: `bench/results/levers_adaptive.{json,md}`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench import retrieval_sets as rs
from bench.locomo import REPO_ROOT
from bench.locomo_retrieval import Pool, bootstrap_difference

OUT = REPO_ROOT / "bench" / "results" / "levers_adaptive"
BUDGET = 400

#: name → RankingParams overrides; `current` is main's defaults
VARIANTS: dict[str, dict[str, Any]] = {
    "current": {},
    "fill": {"nearest_fill": True},
    "fill_m0.1": {"nearest_fill": True, "fill_margin": 0.1},
    "fill_m0.2": {"nearest_fill": True, "fill_margin": 0.2},
    "coverage": {"fusion_evidence": "coverage"},
    "idf_0.5": {"fusion_evidence": "idf", "evidence_full": 0.5},
    "idf_0.3": {"fusion_evidence": "idf", "evidence_full": 0.3},
    "agree_0.3": {"fusion_evidence": "agreement", "evidence_full": 0.3},
    "agree_0.1": {"fusion_evidence": "agreement", "evidence_full": 0.1},
    "idf_0.3+fill_m0.1": {
        "fusion_evidence": "idf",
        "evidence_full": 0.3,
        "nearest_fill": True,
        "fill_margin": 0.1,
    },
    "fill_m0.3": {"nearest_fill": True, "fill_margin": 0.3},
    "idf_0.3+fill_m0.2": {
        "fusion_evidence": "idf",
        "evidence_full": 0.3,
        "nearest_fill": True,
        "fill_margin": 0.2,
    },
    "idf_0.5+fill_m0.2": {
        "fusion_evidence": "idf",
        "evidence_full": 0.5,
        "nearest_fill": True,
        "fill_margin": 0.2,
    },
}


class _NoisyRanker(rs.ServiceRanker):
    """`ServiceRanker` whose block uses `params` too and records items and tokens."""

    def __init__(self, rt: Any, params: Any, name: str) -> None:
        super().__init__(rt, params, name)
        self.noise: list[tuple[int, int]] = []

    async def block(
        self,
        dataset: rs.RetrievalSet,
        pool: Pool,
        question: rs.Question,
        budget: int,
        ranked: Sequence[int],
    ) -> list[int]:
        original = self.rt.ranking_params
        params = self.params
        self.rt.ranking_params = lambda b=None: dataclasses.replace(
            params, budget_tokens=original(b).budget_tokens
        )
        try:
            taken = await super().block(dataset, pool, question, budget, ranked)
        finally:
            self.rt.ranking_params = original
        costs = rs.line_costs(pool) if id(pool) not in rs._COSTS else rs._COSTS[id(pool)]
        rs._COSTS[id(pool)] = costs
        self.noise.append((len(taken), sum(costs[i] for i in taken)))
        return taken


def _memoise_candidates() -> None:
    """Keep each (scope, query)'s candidate lists: they do not depend on the ranking."""
    from service.flows import candidates

    gather = candidates.gather
    memo: dict[tuple[str, str], Any] = {}

    async def cached(rt: Any, *, scope: Any, query: str, query_vector: Any, limit: int) -> Any:
        key = (repr(scope), query)
        if key not in memo:
            memo[key] = await gather(
                rt, scope=scope, query=query, query_vector=query_vector, limit=limit
            )
        return memo[key]

    candidates.gather = cached

    from service.storage import memory_search

    pairwise = memory_search.pairwise_similarity
    pairs: dict[tuple[int, ...], Any] = {}

    async def cached_pairs(session: Any, *, seqs: Sequence[int]) -> Any:
        key = tuple(seqs)
        if key not in pairs:
            pairs[key] = await pairwise(session, seqs=seqs)
        return pairs[key]

    memory_search.pairwise_similarity = cached_pairs


def _halves(name: str, dataset: rs.RetrievalSet) -> dict[str, list[bool]]:
    """Per question: in the tuning half, in the held-out half."""
    qs = dataset.questions
    if name.endswith("_tune"):
        tune = [True] * len(qs)
    elif name.startswith("locomo") or name == "multilingual":
        tune = [False] * len(qs)
    elif name.endswith("_20"):
        tune = [q.pool < 10 for q in qs]
    else:
        tune = [i % 2 == 0 for i in range(len(qs))]
    return {"tune": tune, "held_out": [not t for t in tune]}


def _sub(values: Sequence[float], mask: Sequence[bool]) -> list[float]:
    return [v for v, m in zip(values, mask, strict=True) if m]


def _best(
    baselines: Sequence[rs.Evaluation], means: Mapping[str, Mapping[str, float]], metric: str
) -> rs.Evaluation:
    """The baseline with the highest mean of `metric` on the half (the strongest opponent)."""
    return max(baselines, key=lambda b: means[b.ranker][metric])


def _summary(
    evaluations: Mapping[str, rs.Evaluation],
    baselines: Sequence[rs.Evaluation],
    noise: Mapping[str, list[tuple[int, int]]],
    mask: Sequence[bool],
) -> dict[str, Any]:
    metrics = ["recall@1", "recall@10", "mrr", f"block@{BUDGET}"]
    out: dict[str, Any] = {"n": sum(mask)}
    base_means = {
        b.ranker: {m: 100 * float(np.mean(_sub(b.per_question[m], mask))) for m in metrics}
        for b in baselines
    }
    out["baselines"] = base_means
    current = evaluations["current"]
    for name, ev in evaluations.items():
        row: dict[str, Any] = {}
        for m in metrics:
            mine = _sub(ev.per_question[m], mask)
            best = _best(baselines, base_means, m)
            vs_best = bootstrap_difference(mine, _sub(best.per_question[m], mask))
            vs_cur = bootstrap_difference(mine, _sub(current.per_question[m], mask))
            row[m] = {
                "mean": round(100 * float(np.mean(mine)), 1),
                "vs_current": vs_cur,
                "vs_best": vs_best,
                "best": best.ranker,
            }
        items = [n for n, keep in zip(noise[name], mask, strict=True) if keep]
        row["items"] = round(float(np.mean([i for i, _ in items])), 2)
        row["tokens"] = round(float(np.mean([t for _, t in items])), 1)
        out[name] = row
    return out


async def _run(
    sets: Mapping[str, rs.RetrievalSet],
    encoder: Any,
    variants: Mapping[str, dict[str, Any]],
    partial: Path | None = None,
) -> dict[str, Any]:
    constants = rs.load_tuned_constants()
    _memoise_candidates()
    results: dict[str, Any] = {}
    async with rs.service(encoder) as rt:
        loader = rs.ServiceRanker(rt)
        for name, dataset in sets.items():
            await loader.add(dataset)
            baselines = [
                await rs.evaluate(r, dataset, budgets=(BUDGET,))
                for r in rs.baseline_rankers(constants[dataset.corpus])
            ]
            evaluations: dict[str, rs.Evaluation] = {}
            noise: dict[str, list[tuple[int, int]]] = {}
            for variant, overrides in variants.items():
                params = dataclasses.replace(rt.ranking_params(), **overrides)
                ranker = _NoisyRanker(rt, params, variant)
                evaluations[variant] = await rs.evaluate(ranker, dataset, budgets=(BUDGET,))
                noise[variant] = ranker.noise
                print(f"{name} {variant}: {evaluations[variant].means}", file=sys.stderr)
            results[name] = {
                half: _summary(evaluations, baselines, noise, mask)
                for half, mask in _halves(name, dataset).items()
                if any(mask)
            }
            if partial is not None:  # each set on disk as soon as it is measured
                partial.write_text(json.dumps(results) + "\n", encoding="utf-8")
    return results


def _cell(c: Mapping[str, Any]) -> str:
    return f"{c['diff']:+.1f} [{c['low']:+.1f}, {c['high']:+.1f}]"


def render(results: Mapping[str, Any]) -> str:
    """Markdown: per set and half, every variant's means and differences."""
    lines = ["# Adaptive levers on seven sets (bench/levers_adaptive.py)", ""]
    for name, halves in results.items():
        for half, doc in halves.items():
            base = ", ".join(
                f"{b} {v['recall@10']:.1f} / {v[f'block@{BUDGET}']:.1f}"
                for b, v in doc["baselines"].items()
            )
            lines += [
                f"## {name}, {half} (n = {doc['n']}); baselines R@10 / block: {base}",
                "",
                "| variant | R@1 | R@10 | MRR | block | block − current | R@1 − best | "
                "R@10 − best | block − best | items | tokens |",
                "|---|---:|---:|---:|---:|---|---|---|---|---:|---:|",
            ]
            blk = f"block@{BUDGET}"
            for variant, row in doc.items():
                if variant in ("n", "baselines"):
                    continue
                lines.append(
                    f"| {variant} | {row['recall@1']['mean']:.1f} | {row['recall@10']['mean']:.1f}"
                    f" | {row['mrr']['mean']:.1f} | {row[blk]['mean']:.1f} | "
                    f"{_cell(row[blk]['vs_current'])} | {_cell(row['recall@1']['vs_best'])} | "
                    f"{_cell(row['recall@10']['vs_best'])} | {_cell(row[blk]['vs_best'])} | "
                    f"{row['items']} | {row['tokens']} |"
                )
            lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run every variant on every set and half; write `--out`.json and .md."""
    parser = argparse.ArgumentParser(prog="python -m bench.levers_adaptive")
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--prefeval", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--variants", type=lambda s: s.split(","), default=None)
    parser.add_argument("--sets", type=lambda s: s.split(","), default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sets = rs.load_sets(locomo=args.locomo, prefeval=args.prefeval)
    for corpus, dataset in rs.locomo_sets(args.locomo, conversations=range(5)).items():
        dataset.name = f"{corpus}_tune"
        sets[dataset.name] = dataset
    if args.sets:
        sets = {n: s for n, s in sets.items() if n in args.sets}
    chosen: Callable[[str], bool] = lambda v: args.variants is None or v in args.variants  # noqa: E731
    variants = {k: v for k, v in VARIANTS.items() if chosen(k) or k == "current"}
    encoder = rs.embed_sets(sets)
    partial = args.out.with_suffix(".partial.json")
    results = asyncio.run(_run(sets, encoder, variants, partial))
    doc = {
        "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round(time.perf_counter() - started, 1),
        "variants": variants,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(doc) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(render(results), encoding="utf-8")
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
