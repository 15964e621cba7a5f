"""What a bank's own HNSW index costs in retrieval quality, on real text: LoCoMo turns.

    python -m bench.ann_recall --data ../shared/data/locomo/locomo10.json

A bank with MEMORY_ANN_MIN_MEMORIES (5,000) active memories or more is searched through its
own HNSW index (approximate) instead of the exact scan. This measures the difference on the
turns of `../shared/bench/LOCOMO.md` (protocol steps 1–4, categories 1–4, n = 1,536), twice:

- **per conversation**: one owner per conversation (about 600 memories each), as in
  `bench.locomo_retrieval`;
- **all conversations in one owner**: the 5,882 turns of the ten conversations as one user's
  memories (above the threshold, the size the index is for); evidence ids are prefixed by
  their conversation so they stay distinct, and every question is searched among all turns.

Each is ranked by `service.flows.context.retrieve` (full ranking, no relevance gate) first
with exact scans only, then after `service.flows.owner_indexes.refresh` has built every
owner's indexes (threshold lowered to 100 for this run; `hnsw.ef_search` = 100, the
default). Reported: Recall@10 / @50 and MRR of both runs, and the overlap of the 50 vector
candidates (`storage.hybrid_search.candidates`) with the exact ones (recall of the approximate
search itself), with the number of exact fallbacks.

Results: `bench/results/ann_recall.json` and `.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import DEFAULT_DATA_PATH, REPO_ROOT, QAItem, load_conversations, load_qa
from bench.locomo_retrieval import (
    TOP_K,
    Pool,
    _scrubbed_environment,
    evaluate,
    insert_pool,
    read_scope,
    service_runtime,
    summarize,
    turn_pool,
)

DEFAULT_OUT_DIR = REPO_ROOT / "bench" / "results"
ALL_OWNER = "locomo-all-turns"
INDEX_THRESHOLD = 100
"""MEMORY_ANN_MIN_MEMORIES for the indexed run: every owner of this data gets its indexes."""


def _progress(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def pooled(
    pools: Sequence[Pool],
    questions: Mapping[str, Sequence[QAItem]],
) -> tuple[Pool, dict[str, list[QAItem]]]:
    """All turn pools as one owner's memories, and every question with prefixed evidence."""
    covers = [
        frozenset(f"{p.conversation_id}/{d}" for d in cover) for p in pools for cover in p.covers
    ]
    merged = Pool(
        conversation_id="all",
        kind="turns",
        owner_id=ALL_OWNER,
        texts=[t for p in pools for t in p.texts],
        covers=covers,
        dates=[d for p in pools for d in p.dates],
        now=max(p.now for p in pools),
        vectors=np.concatenate([p.vectors for p in pools]),
    )
    asked = [
        dataclasses.replace(q, evidence=tuple(f"{p.conversation_id}/{e}" for e in q.evidence))
        for p in pools
        for q in questions[p.conversation_id]
    ]
    return merged, {"all": asked}


async def _rank(
    rt: Any,
    pools: Sequence[Pool],
    questions: Mapping[str, Sequence[QAItem]],
    vectors: Mapping[str, np.ndarray],
) -> dict[str, Any]:
    from service.flows.context import retrieve

    async def search(pool: Pool, q: QAItem) -> list[int]:
        ranked = await retrieve(
            rt,
            scope=read_scope(pool.owner_id),
            query=q.question,
            now=pool.now,
            limit=TOP_K,
            query_vector=vectors[q.question],
        )
        return [pool.by_memory_id[r.memory.id] for r in ranked[:TOP_K]]

    record = await evaluate(pools, questions, search)
    summary = summarize(record.rows)["overall"]
    p50, p95 = np.percentile(record.search_ms, [50, 95])
    # summarize gives percentages
    return {
        "recall@10": summary["recall@10"],
        "recall@50": summary["recall@50"],
        "mrr": summary["mrr"],
        "n": len(record.rows),
        "search_ms_p50": round(float(p50), 2),
        "search_ms_p95": round(float(p95), 2),
    }


async def _candidate_overlap(
    rt: Any,
    pools: Sequence[Pool],
    questions: Mapping[str, Sequence[QAItem]],
    vectors: Mapping[str, np.ndarray],
) -> dict[str, Any]:
    """Overlap of the vector candidates through the indexes with the exact ones."""
    from service.storage import hybrid_search, memory_search

    at10, at50, fallbacks, short = [], [], 0, 0
    for pool in pools:
        scope = read_scope(pool.owner_id)
        async with rt.db.unit_of_work() as session:
            indexed = await rt.owner_indexes.cells(
                session,
                scope,
                model=rt.encoder.model_name,
                dimension=rt.encoder.dimension,
                ef_search=rt.settings.ann_ef_search,
            )
        if not indexed.ann:
            raise RuntimeError(f"{pool.owner_id} has no HNSW index")
        for q in questions[pool.conversation_id]:
            async with rt.db.unit_of_work() as session:
                fast = await hybrid_search.candidates(
                    session,
                    scope=scope,
                    text=q.question,
                    query_vector=vectors[q.question],
                    limit=TOP_K,
                    indexed=indexed,
                )
                exact = await memory_search.search(
                    session, scope=scope, query_vector=vectors[q.question], limit=TOP_K
                )
            fallbacks += fast.exact_fallbacks
            short += len(fast.semantic) < len(exact)
            got = [c.memory.seq for c in fast.semantic]
            want = [c.memory.seq for c in exact]
            at10.append(len(set(got[:10]) & set(want[:10])) / max(len(want[:10]), 1))
            at50.append(len(set(got) & set(want)) / max(len(want), 1))
    return {
        "overlap@10": round(float(np.mean(at10)), 4),
        "overlap@10_min": round(float(np.min(at10)), 2),
        "overlap@50": round(float(np.mean(at50)), 4),
        "overlap@50_min": round(float(np.min(at50)), 2),
        "exact_fallbacks": fallbacks,
        "short_lists": short,
        "n": len(at50),
    }


async def run(data: Path) -> dict[str, Any]:
    """Build both corpora, rank exactly, build the indexes, rank again; the JSON document."""
    _scrubbed_environment()
    from service.embeddings.encoder import Encoder
    from service.flows import owner_indexes
    from service.storage import migrate
    from service.storage.db import start_embedded

    started = time.perf_counter()
    samples = load_conversations(data)
    questions = {str(s["sample_id"]): load_qa(s) for s in samples}
    pools = [turn_pool(s) for s in samples]
    encoder = Encoder()
    _progress(f"embedding {sum(len(p.texts) for p in pools)} turns")
    for pool in pools:
        pool.vectors = encoder.encode_sync(pool.texts)
    every = [q.question for qs in questions.values() for q in qs]
    vectors = dict(zip(every, encoder.encode_sync(every), strict=True))
    merged, merged_questions = pooled(pools, questions)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ann-recall-") as tmp:
        url, server = start_embedded(Path(tmp))
        try:
            migrate.upgrade(url)
            async with service_runtime(url, Path(tmp) / "state", encoder) as rt:
                for pool in [*pools, merged]:
                    await insert_pool(rt, pool)
                corpora = {
                    "per_conversation": (pools, questions),
                    "one_owner": ([merged], merged_questions),
                }
                for name, (ps, qs) in corpora.items():
                    _progress(f"{name}: exact")
                    out[name] = {"exact": await _rank(rt, ps, qs, vectors)}
                settings = rt.settings.model_copy(update={"ann_min_memories": INDEX_THRESHOLD})
                indexed_rt = dataclasses.replace(rt, settings=settings)
                t0 = time.perf_counter()
                built = await owner_indexes.refresh(indexed_rt)
                out["index_build"] = {
                    "indexes": len(built.built),
                    "failed": len(built.failed),
                    "seconds": round(time.perf_counter() - t0, 1),
                }
                for name, (ps, qs) in corpora.items():
                    _progress(f"{name}: through the indexes")
                    out[name]["indexed"] = await _rank(indexed_rt, ps, qs, vectors)
                    out[name]["candidates"] = await _candidate_overlap(indexed_rt, ps, qs, vectors)
        finally:
            server.cleanup()
    encoder.close()
    out["meta"] = {
        "data": str(data),
        "questions": len(every),
        "memories": len(merged.texts),
        "owners_per_conversation": len(pools),
        "top_k": TOP_K,
        "ef_search": "max(MEMORY_ANN_EF_SEARCH = 100, 2 x 50) = 100",
        "hnsw": "m 16, ef_construction 64, vector_cosine_ops",
        "cpu_count": os.cpu_count(),
        "runtime_s": round(time.perf_counter() - started, 1),
        "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return out


def render_markdown(results: Mapping[str, Any]) -> str:
    """The Markdown report of a `run` document."""
    meta = results["meta"]
    lines = [
        "# Per-owner HNSW index against the exact scan, on LoCoMo turns",
        "",
        f"Finished {meta['finished']} in {meta['runtime_s']:.0f} s. {meta['questions']:,} "
        f"questions (categories 1–4), {meta['memories']:,} turns; HNSW {meta['hnsw']}, "
        f"ef_search {meta['ef_search']}; {results['index_build']['indexes']} indexes built "
        f"in {results['index_build']['seconds']} s.",
        "",
        "| owners | search | Recall@10 | Recall@50 | MRR | search p50 / p95 (ms) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    names = {
        "per_conversation": "one per conversation (≈ 600 memories)",
        "one_owner": f"all turns in one owner ({meta['memories']:,} memories)",
    }
    for key, title in names.items():
        for run_name in ("exact", "indexed"):
            row = results[key][run_name]
            label = "exact scans" if run_name == "exact" else "own HNSW + GIN indexes"
            lines.append(
                f"| {title} | {label} | {row['recall@10']:.1f} % "
                f"| {row['recall@50']:.1f} % | {row['mrr']:.1f} % "
                f"| {row['search_ms_p50']:.1f} / {row['search_ms_p95']:.1f} |"
            )
    lines += [
        "",
        "Vector candidates through the index against the exact top 50 (share of "
        "the exact ones found, mean and worst question):",
        "",
        "| owners | overlap of the top 10 (min) | overlap of all 50 (min) | exact "
        "fallbacks | lists shorter than exact |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, title in names.items():
        c = results[key]["candidates"]
        top10 = f"{c['overlap@10'] * 100:.1f} % ({c['overlap@10_min'] * 100:.0f} %)"
        top50 = f"{c['overlap@50'] * 100:.1f} % ({c['overlap@50_min'] * 100:.0f} %)"
        lines.append(
            f"| {title} | {top10} | {top50} | {c['exact_fallbacks']} | {c['short_lists']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run, write JSON and Markdown, print the Markdown."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.ann_recall", description=__doc__.split("\n\n")[0]
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
        help="where ann_recall.{json,md} go (default: bench/results)",
    )
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.data))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "ann_recall.json").write_text(
        json.dumps(results, indent=1) + "\n", encoding="utf-8"
    )
    markdown = render_markdown(results)
    (args.out_dir / "ann_recall.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
