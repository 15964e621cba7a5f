"""Tuning and held-out halves of `bench.retrieval_sets`' results, ours against the best baseline.

    python -m bench.retrieval_halves [--before <dir of an earlier run's <set>.json>]

`bench.retrieval_sets` reports every PrefEval question; the read path's constants were chosen
on a half of them (`bench.levers_adaptive`: users 0–9 of the 20-user deals, even-numbered
questions of the one-user sets). This splits each set's per-question values into those halves
(LoCoMo 5–9 and the multilingual set are held out whole) and gives, per half and metric, ours
minus the best baseline on that half — and, with `--before`, ours minus the read path of an
earlier run — as the mean difference in points with a paired bootstrap 95 % interval
(`bench.locomo_retrieval.bootstrap_difference`). Output: Markdown on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo_retrieval import bootstrap_difference
from bench.retrieval_sets import OUT_DIR, SET_ORDER

METRICS = ("recall@1", "recall@10", "mrr", "block@400")


def halves(name: str, keys: Sequence[str]) -> dict[str, list[bool]]:
    """Per question (in the set's order): tuning half, held-out half.

    `bench.retrieval_sets.prefeval_set` lists each user's questions together, users in
    order, 50 each for 1,000 pairs and 20 users: the first half is users 0–9.
    """
    n = len(keys)
    if name.endswith("_20"):
        tune = [i < n // 2 for i in range(n)]
    elif name.startswith("prefeval"):
        tune = [i % 2 == 0 for i in range(n)]
    else:
        tune = [False] * n
    return {"tune": tune, "held_out": [not t for t in tune]}


def _pick(values: Sequence[float], mask: Sequence[bool]) -> list[float]:
    return [v for v, keep in zip(values, mask, strict=True) if keep]


def _cell(c: Mapping[str, float]) -> str:
    verdict = "tie" if c["low"] <= 0 <= c["high"] else ("better" if c["low"] > 0 else "worse")
    return f"{c['diff']:+.1f} [{c['low']:+.1f}, {c['high']:+.1f}] {verdict}"


def summarise(doc: Mapping[str, Any], before: Mapping[str, Any] | None) -> list[str]:
    """Markdown rows for one set's document (`<set>.json`)."""
    per = doc["per_question"]
    lines = []
    for half, mask in halves(doc["set"], doc["per_question_keys"]).items():
        if not any(mask):
            continue
        for metric in METRICS:
            if metric not in per["ours"]:
                continue
            ours = _pick(per["ours"][metric], mask)
            baselines = {r: _pick(v[metric], mask) for r, v in per.items() if r != "ours"}
            best = max(baselines, key=lambda r: float(np.mean(baselines[r])))
            row = (
                f"| {doc['set']} | {half} (n = {sum(mask)}) | {metric} | "
                f"{100 * np.mean(ours):.1f} | {best} {100 * np.mean(baselines[best]):.1f} | "
                f"{_cell(bootstrap_difference(ours, baselines[best]))} |"
            )
            if before is not None:
                earlier = _pick(before["per_question"]["ours"][metric], mask)
                change = _cell(bootstrap_difference(ours, earlier))
                row += f" {100 * np.mean(earlier):.1f} | {change} |"
            lines.append(row)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the halves' table of every set in `--dir` (default bench/results/retrieval_sets)."""
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval_halves")
    parser.add_argument("--dir", type=Path, default=OUT_DIR)
    parser.add_argument("--before", type=Path, default=None)
    args = parser.parse_args(argv)
    head = "| set | half | metric | ours | best baseline | ours − best |"
    rule = "|---|---|---|---:|---|---|"
    if args.before is not None:
        head += " ours before | now − before |"
        rule += "---:|---|"
    print(head)
    print(rule)
    for name in SET_ORDER:
        path = args.dir / f"{name}.json"
        if not path.exists():
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        earlier = None
        if args.before is not None and (args.before / f"{name}.json").exists():
            earlier = json.loads((args.before / f"{name}.json").read_text(encoding="utf-8"))
        print("\n".join(summarise(doc, earlier)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
