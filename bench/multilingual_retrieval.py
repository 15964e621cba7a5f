"""Retrieval over non-English memories: what the default model and full-text search do there.

    python -m bench.multilingual_retrieval

`bench/multilingual_facts.json` (this project's own set) holds one user's 60 facts — 12 each
in German, Spanish, French, Italian and Portuguese — and 96 questions, each answered by
exactly one fact: 60 in the fact's own language and 36 mixed (an English question about a
non-English fact, or a question in another language). The facts are stored through
`service.storage.memories.insert` in a migrated embedded PostgreSQL and every question is ranked by
`service.flows.context.retrieve` (ours), by ours with the full-text branch only
(`semantic_weight` 0) and with the vectors only (`keyword_weight` 0), and by dense cosine
over the same vectors. Recall@1, Recall@5 and MRR per kind of question.

Results: `bench/results/multilingual_retrieval.{json,md}`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import REPO_ROOT
from bench.locomo_retrieval import (
    Pool,
    _scrubbed_environment,
    insert_pool,
    read_scope,
    recall_at_k,
    reciprocal_rank,
    service_runtime,
)

DATA = REPO_ROOT / "bench" / "multilingual_facts.json"
OUT = REPO_ROOT / "bench" / "results"
KINDS = ("de", "es", "fr", "it", "pt", "mixed")
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def metrics(ranked: Sequence[str], gold: str) -> dict[str, float]:
    """Recall@1, Recall@5 and reciprocal rank of one question (one gold fact id)."""
    covers = [{fact} for fact in ranked]
    return {
        "recall@1": recall_at_k(covers, [gold], 1),
        "recall@5": recall_at_k(covers, [gold], 5),
        "mrr": reciprocal_rank(covers, [gold]),
    }


async def run() -> dict[str, Any]:
    """The whole benchmark; returns the JSON document."""
    _scrubbed_environment()
    from service.embeddings.encoder import Encoder
    from service.storage import migrate
    from service.storage.db import start_embedded

    data = json.loads(DATA.read_text(encoding="utf-8"))
    facts, questions = data["facts"], data["questions"]
    encoder = Encoder()
    pool = Pool(
        conversation_id="multilingual",
        kind="facts",
        owner_id="multilingual-user",
        texts=[f["text"] for f in facts],
        covers=[frozenset({f["id"]}) for f in facts],
        dates=[NOW - timedelta(days=i) for i in range(len(facts))],
        now=NOW,
    )
    pool.vectors = encoder.encode_sync(pool.texts)
    ids = [f["id"] for f in facts]
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="multilingual-bench-") as tmp:
        url, server = start_embedded(Path(tmp))
        try:
            migrate.upgrade(url)
            async with service_runtime(url, Path(tmp) / "state", encoder) as rt:
                from service.flows import context

                await insert_pool(rt, pool)
                base = rt.ranking_params()
                variants = {
                    "ours": base,
                    "ours, full text only": dataclasses.replace(base, semantic_weight=0.0),
                    "ours, vectors only": dataclasses.replace(base, keyword_weight=0.0),
                }
                for q in questions:
                    vector = encoder.encode_sync([q["q"]])[0]
                    dense = [ids[i] for i in np.argsort(-(pool.vectors @ vector), kind="stable")]
                    rows.setdefault("dense cosine", []).append(
                        {"kind": q["kind"]} | metrics(dense, q["fact"])
                    )
                    for name, params in variants.items():
                        ranked = await context.retrieve(
                            rt,
                            scope=read_scope(pool.owner_id),
                            query=q["q"],
                            now=NOW,
                            limit=len(facts),
                            params=params,
                            query_vector=vector,
                        )
                        found = [ids[pool.by_memory_id[r.memory.id]] for r in ranked]
                        rows.setdefault(name, []).append(
                            {"kind": q["kind"]} | metrics(found, q["fact"])
                        )
        finally:
            server.cleanup()

    def mean(group: list[dict[str, Any]]) -> dict[str, Any]:
        return {"n": len(group)} | {
            m: round(100.0 * float(np.mean([r[m] for r in group])), 1)
            for m in ("recall@1", "recall@5", "mrr")
        }

    return {
        "facts": len(facts),
        "questions": len(questions),
        "model": encoder.model_name,
        "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "retrievers": {
            name: {"overall": mean(group)}
            | {kind: mean([r for r in group if r["kind"] == kind]) for kind in KINDS}
            for name, group in rows.items()
        },
    }


def render_markdown(results: dict[str, Any]) -> str:
    """R@1 / R@5 / MRR per retriever and kind of question."""
    first = next(iter(results["retrievers"].values()))
    lines = [
        "# Retrieval over German, Spanish, French, Italian and Portuguese memories",
        "",
        f"{results['facts']} facts of one user, {results['questions']} questions "
        f"(`bench/multilingual_facts.json`), model {results['model']}; finished "
        f"{results['finished']}. Cells: R@1 / R@5 / MRR (%).",
        "",
        "| retriever | "
        + " | ".join(f"{k} (n = {first[k]['n']})" for k in (*KINDS, "overall"))
        + " |",
        "|---|" + "---:|" * (len(KINDS) + 1),
    ]
    for name, row in results["retrievers"].items():
        cells = [
            f"{row[k]['recall@1']:.1f} / {row[k]['recall@5']:.1f} / {row[k]['mrr']:.1f}"
            for k in (*KINDS, "overall")
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join([*lines, ""])


def main() -> int:
    """Run, write JSON and Markdown, print the Markdown."""
    results = asyncio.run(run())
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "multilingual_retrieval.json").write_text(
        json.dumps(results, indent=1) + "\n", encoding="utf-8"
    )
    markdown = render_markdown(results)
    (OUT / "multilingual_retrieval.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
