"""The read path's adaptive levers, each measured on LoCoMo and on PrefEval explicit preferences.

    python -m bench.levers_prefeval --data ../shared/data/locomo/locomo10.json

LLM-free and deterministic. One embedded PostgreSQL holds three memory sets, loaded by the
other benchmarks' own loaders:

- LoCoMo dialogue turns and observation facts, all ten conversations
  (`bench.locomo_retrieval.turn_pool` / `observation_pool`, questions of categories 1–4 with
  cleaned evidence, `bench.locomo.load_qa`): conversations 0–4 tune, 5–9 are reported.
- PrefEval explicit preferences (`bench.builtin_memory.prefeval_pools`), the 1,000 pairs dealt
  to `PREFEVAL_USERS` = 20 users (about 50 preferences each, as the audit of issue 28):
  users 0–9 tune, 10–19 are reported.

Each variant is a set of the service's settings (`VARIANTS`: `current` is the defaults of
main before the levers); for each question it measures

- R@10: evidence share in the top 10 of `service.flows.context.retrieve` without the gate
  (LoCoMo's Recall@10, `bench.locomo_retrieval.recall_at_k`; PrefEval: the preference is in
  the top 10);
- block@400: evidence share inside the inlet's own block at 400 tokens
  (`service.flows.context.recall`), what reaches the model.

Dense cosine (exact, all-MiniLM-L6-v2) is measured beside them: its top 10, and its ranking
filling the same 400 tokens (`bench.locomo_retrieval.block_coverage`). Differences against
`current` and against dense are paired by question with a bootstrap 95 % interval
(`bench.locomo_retrieval.bootstrap_difference`). Results: `bench/results/<name>.json` and
`.md` (`--name`, default `levers_prefeval`); the committed runs are `bench/results/levers_run1.md`
(every set) and `bench/results/levers_prefeval_only.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.builtin_memory import DEFAULT_PREFEVAL, prefeval_pools
from bench.locomo import DEFAULT_DATA_PATH, REPO_ROOT, load_conversations, load_qa
from bench.locomo_retrieval import (
    Pool,
    _embed_with_cache,
    _scrubbed_environment,
    block_coverage,
    bootstrap_difference,
    insert_pool,
    observation_pool,
    read_scope,
    recall_at_k,
    service_runtime,
    turn_pool,
)

__all__ = ["VARIANTS", "main"]

DEFAULT_OUT_DIR = REPO_ROOT / "bench" / "results"
#: 1,000 pairs / 20 users ≈ 50 preferences each: the audit's setting (issue 28).
PREFEVAL_USERS = 20
#: Tuning and held-out parts of each set.
LOCOMO_TUNE, LOCOMO_HELD_OUT = (0, 1, 2, 3, 4), (5, 6, 7, 8, 9)
PREFEVAL_TUNE = tuple(range(10))
BUDGET = 400
K = 10

#: Settings of each measured variant, over the service's defaults.
VARIANTS: dict[str, dict[str, Any]] = {
    "current": {"adaptive_fusion": False, "nearest_reserve": 0, "long_memory_chars": 0},
    "fusion": {"adaptive_fusion": True, "nearest_reserve": 0, "long_memory_chars": 0},
    "reserve3": {"adaptive_fusion": False, "nearest_reserve": 3, "long_memory_chars": 0},
    "reserve5": {"adaptive_fusion": False, "nearest_reserve": 5, "long_memory_chars": 0},
    "reserve8": {"adaptive_fusion": False, "nearest_reserve": 8, "long_memory_chars": 0},
    "fusion+reserve3": {"adaptive_fusion": True, "nearest_reserve": 3, "long_memory_chars": 0},
    "fusion+reserve5": {"adaptive_fusion": True, "nearest_reserve": 5, "long_memory_chars": 0},
    "fusion+reserve8": {"adaptive_fusion": True, "nearest_reserve": 8, "long_memory_chars": 0},
    "sentences": {"adaptive_fusion": False, "nearest_reserve": 0, "long_memory_chars": 300},
    "all": {"adaptive_fusion": True, "nearest_reserve": 5, "long_memory_chars": 300},
}


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


Questions = Mapping[str, Sequence[tuple[str, tuple[str, ...]]]]


Tuning = Callable[[str, int], bool]


def _sets(data: Path, prefeval: Path) -> dict[str, tuple[list[Pool], Questions, Tuning]]:
    """Each set's pools, questions per pool and which (pool, question number) tune."""
    samples = load_conversations(data)
    loco_q = {str(s["sample_id"]): [(q.question, q.evidence) for q in load_qa(s)] for s in samples}
    tune = {str(samples[i]["sample_id"]) for i in LOCOMO_TUNE}
    pref_pools, pref_q = prefeval_pools(prefeval, users=PREFEVAL_USERS)
    pref_tune = {f"prefeval-user-{i}" for i in PREFEVAL_TUNE}
    one_pools, one_q = prefeval_pools(prefeval, users=1)
    for pool in one_pools:  # its own owner: the 20 users' memories are in the same database
        pool.owner_id = pool.conversation_id = "prefeval-one-user"
    one_q = {"prefeval-one-user": one_q.popitem()[1]}
    return {
        "locomo_turns": ([turn_pool(s) for s in samples], loco_q, lambda p, _: p in tune),
        "locomo_facts": ([observation_pool(s) for s in samples], loco_q, lambda p, _: p in tune),
        "prefeval_explicit": (
            pref_pools,
            {k: [(q, (e,)) for q, e in v] for k, v in pref_q.items()},
            lambda p, _: p in pref_tune,
        ),
        # one user holding all 1,000: even-numbered questions tune, odd ones are reported
        "prefeval_explicit_1": (
            one_pools,
            {k: [(q, (e,)) for q, e in v] for k, v in one_q.items()},
            lambda _, i: i % 2 == 0,
        ),
    }


async def _measure_variant(
    rt: Any, pools: Sequence[Pool], questions: Questions
) -> list[dict[str, Any]]:
    """Per question of every pool: R@10 (ungated ranking) and block@400 (the inlet's block)."""
    from service.core.records import ChatContext, ChatKind
    from service.flows import context

    rows = []
    for pool in pools:
        chat = ChatContext(user_id=pool.owner_id, kind=ChatKind.SAVED, chat_id="bench-levers")
        for number, (question, evidence) in enumerate(questions[pool.conversation_id]):
            ranked = await context.retrieve(
                rt,
                scope=read_scope(pool.owner_id),
                query=question,
                now=pool.now,
                limit=K,
                apply_gate=False,
            )
            top = [pool.covers[pool.by_memory_id[r.memory.id]] for r in ranked]
            result = await context.recall(
                rt, chat=chat, message=question, budget_tokens=BUDGET, now=pool.now
            )
            shown = {d for m in result.items for d in pool.covers[pool.by_memory_id[m.memory.id]]}
            rows.append(
                {
                    "pool": pool.conversation_id,
                    "number": number,
                    "r10": recall_at_k(top, evidence, K),
                    "block": len(set(evidence) & shown) / len(set(evidence)),
                    "items": len(result.items),
                }
            )
    return rows


def _dense(
    pools: Sequence[Pool], questions: Questions, vectors: Mapping[str, np.ndarray]
) -> list[dict[str, Any]]:
    from service.core.tokens import estimate_tokens

    rows = []
    for pool in pools:
        costs = [
            estimate_tokens(f"- [{d:%Y-%m-%d}] {t}")
            for t, d in zip(pool.texts, pool.dates, strict=True)
        ]
        for number, (question, evidence) in enumerate(questions[pool.conversation_id]):
            ranked = pool.dense_top(vectors[question], len(pool.texts))
            rows.append(
                {
                    "pool": pool.conversation_id,
                    "number": number,
                    "r10": recall_at_k([pool.covers[i] for i in ranked], evidence, K),
                    "block": block_coverage(ranked, costs, pool.covers, evidence, BUDGET),
                    "items": 0,
                }
            )
    return rows


def _summary(rows: Mapping[str, Sequence[Mapping[str, Any]]], tune: Tuning) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part, inside in (("tune", True), ("held_out", False)):
        chosen = {
            name: [r for r in values if tune(r["pool"], r["number"]) == inside]
            for name, values in rows.items()
        }
        entry: dict[str, Any] = {"n": len(chosen["dense"]), "systems": {}, "vs_current": {}}
        for name, values in chosen.items():
            entry["systems"][name] = {
                "r10": round(100 * float(np.mean([r["r10"] for r in values])), 1),
                "block400": round(100 * float(np.mean([r["block"] for r in values])), 1),
                "items": round(float(np.mean([r["items"] for r in values])), 2),
            }
        for name, values in chosen.items():
            if name in ("current", "dense"):
                continue
            entry["vs_current"][name] = {
                m: bootstrap_difference([r[m] for r in values], [r[m] for r in chosen["current"]])
                for m in ("r10", "block")
            }
        entry["vs_dense"] = {
            name: {
                m: bootstrap_difference([r[m] for r in values], [r[m] for r in chosen["dense"]])
                for m in ("r10", "block")
            }
            for name, values in chosen.items()
            if name != "dense"
        }
        out[part] = entry
    return out


async def run(
    data: Path, prefeval: Path, cache_dir: Path | None, variants: Sequence[str], sets: Sequence[str]
) -> dict[str, Any]:
    """The whole benchmark; returns the JSON document."""
    _scrubbed_environment()
    import service.api.app  # noqa: F401  (fail before minutes of embedding)
    from service.embeddings.encoder import Encoder
    from service.storage import migrate
    from service.storage.db import start_embedded

    started = time.perf_counter()
    chosen = {k: v for k, v in _sets(data, prefeval).items() if k in sets}
    _progress("loading the embedding model")
    encoder = Encoder(cache_size=50_000)
    texts = [t for pools, _, _ in chosen.values() for p in pools for t in p.texts]
    _progress(f"embedding {len(texts)} memory texts")
    vectors = _embed_with_cache(encoder, texts, cache_dir)
    offset = 0
    for pools, _, _ in chosen.values():
        for pool in pools:
            pool.vectors = vectors[offset : offset + len(pool.texts)]
            offset += len(pool.texts)
    asked = sorted({q for _, qs, _ in chosen.values() for v in qs.values() for q, _ in v})
    _progress(f"embedding {len(asked)} questions")
    # encode_sync fills the encoder's cache, so the read path finds every question there
    question_vectors = dict(zip(asked, encoder.encode_sync(asked), strict=True))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="levers-bench-") as tmp:
        url, server = start_embedded(Path(tmp))
        try:
            migrate.upgrade(url)
            async with service_runtime(url, Path(tmp) / "state", encoder) as rt:
                # quality, not latency: on a loaded machine the inlet's 0.5 s deadline would
                # answer with the cached profile and count as a miss
                defaults = rt.settings.model_copy(update={"context_deadline_s": 30.0})
                for pools, _, _ in chosen.values():
                    for pool in pools:
                        await insert_pool(rt, pool)
                for name, (pools, questions, tune) in chosen.items():
                    rows: dict[str, list[dict[str, Any]]] = {
                        "dense": _dense(pools, questions, question_vectors)
                    }
                    for variant in variants:
                        _progress(f"{name}: {variant}")
                        rt.settings = defaults.model_copy(update=VARIANTS[variant])
                        rows[variant] = await _measure_variant(rt, pools, questions)
                    rt.settings = defaults
                    results[name] = _summary(rows, tune)
        finally:
            server.cleanup()
    results["meta"] = {
        "variants": {v: VARIANTS[v] for v in variants},
        "locomo": str(data),
        "locomo_split": {"tune": list(LOCOMO_TUNE), "held_out": list(LOCOMO_HELD_OUT)},
        "prefeval": str(prefeval),
        "prefeval_users": PREFEVAL_USERS,
        "prefeval_tune_users": list(PREFEVAL_TUNE),
        "budget_tokens": BUDGET,
        "bootstrap": "paired by question, 2,000 resamples, seed 0",
        "cpu_count": os.cpu_count(),
        "runtime_s": round(time.perf_counter() - started, 1),
        "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return results


def _ci(d: Mapping[str, float]) -> str:
    return f"{d['diff']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}]"


def render_markdown(results: Mapping[str, Any]) -> str:
    """The results as tables: per set and part, each system's R@10 and block@400."""
    lines = ["# Read-path levers (bench/levers_prefeval.py)", ""]
    for name, entry in results.items():
        if name == "meta":
            continue
        for part in ("held_out", "tune"):
            e = entry[part]
            lines += [
                f"## {name}, {part.replace('_', '-')} (n = {e['n']})",
                "",
                "| system | R@10 % | block@400 % | items | R@10 − current | block − current "
                "| block − dense |",
                "|---|---|---|---|---|---|---|",
            ]
            for system, s in e["systems"].items():
                vs = e["vs_current"].get(system)
                vd = e["vs_dense"].get(system)
                lines.append(
                    f"| {system} | {s['r10']} | {s['block400']} | {s['items']} | "
                    f"{_ci(vs['r10']) if vs else ''} | {_ci(vs['block']) if vs else ''} | "
                    f"{_ci(vd['block']) if vd else ''} |"
                )
            lines.append("")
    meta = results["meta"]
    lines += [
        f"Variants: `{json.dumps(meta['variants'])}`. Runtime {meta['runtime_s']} s on "
        f"{meta['cpu_count']} CPUs, finished {meta['finished']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_PATH, help="locomo10.json")
    parser.add_argument("--prefeval", type=Path, default=DEFAULT_PREFEVAL)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument("--cache-dir", type=Path, default=REPO_ROOT / "bench" / ".work")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument(
        "--sets",
        nargs="+",
        default=["locomo_turns", "locomo_facts", "prefeval_explicit", "prefeval_explicit_1"],
        choices=["locomo_turns", "locomo_facts", "prefeval_explicit", "prefeval_explicit_1"],
    )
    parser.add_argument("--name", default="levers_prefeval", help="results file stem")
    args = parser.parse_args(argv)
    for path in (args.data, args.prefeval):
        if not path.exists():
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
    results = asyncio.run(run(args.data, args.prefeval, args.cache_dir, args.variants, args.sets))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / f"{args.name}.md").write_text(render_markdown(results))
    print(render_markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
