r"""The nearest fill's margin: what it adds to the block, and what it injects into generic turns.

    python -m bench.fill_noise --prefeval ../shared/data/prefeval

Over one embedded PostgreSQL holding PrefEval (explicit and implicit, 20 users; explicit, one
user) and the multilingual set, each variant of `MEMORY_NEAREST_FILL` / `MEMORY_FILL_MARGIN` /
`MEMORY_FILL_MARGIN_FROM` is measured as the block at 400 tokens (`bench.retrieval_sets`, all
questions, not halves) and as the query-chosen items the inlet injects for twelve generic
requests that are about nothing a user said ("Summarize this article for me", "hi", …), asked
of the first ten users of every set. A relevance gate exists so that such a turn injects
nothing; a fill that rewards the block figure by filling the budget shows here as noise.
Writes `bench/results/fill_noise.{json,md}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np

from bench import retrieval_sets as rs

GENERIC = (
    "Can you help me write an email?",
    "Translate this into French: good morning",
    "Summarize this article for me",
    "hi",
    "thanks!",
    "tell me a joke",
    "Write a python function that sorts a list",
    "What's the weather like today?",
    "Give me a recipe for dinner",
    "Explain quantum computing simply",
    "Proofread this paragraph please",
    "What time is it in Tokyo?",
)
#: (fill on, margin, margin applies from the nearest memory's cosine)
VARIANTS = ((True, 0.3, 0.2), (True, 0.3, 0.4), (True, 0.0, 0.2), (False, 0.0, 0.2))
SETS = ("prefeval_explicit_20", "prefeval_implicit_20", "prefeval_explicit_1", "multilingual")
OUT = Path(__file__).parent / "results" / "fill_noise"


async def measure(prefeval: Path) -> dict[str, Any]:
    """{variant label: {set: block@400 %, generic-turn figures}}."""
    from service.core.records import ChatContext, ChatKind
    from service.flows import context

    sets = {k: v for k, v in rs.load_sets(locomo=None, prefeval=prefeval).items() if k in SETS}
    encoder = rs.embed_sets(sets)
    out: dict[str, Any] = {}
    async with rs.service(encoder) as rt:
        ours = rs.ServiceRanker(rt)
        for dataset in sets.values():
            await ours.add(dataset)
        for fill, margin, start in VARIANTS:
            rt.settings.nearest_fill = fill
            rt.settings.fill_margin = margin
            rt.settings.fill_margin_from = start
            label = f"margin {margin} from cosine {start}" if fill else "fill off"
            row: dict[str, Any] = {}
            for name, dataset in sets.items():
                row[name] = round((await rs.evaluate(ours, dataset)).means["block@400"], 1)
            counts = []
            for dataset in sets.values():
                for pool in dataset.pools[:10]:
                    chat = ChatContext(user_id=pool.owner_id, kind=ChatKind.SAVED, chat_id="g")
                    for message in GENERIC:
                        result = await context.recall(
                            rt, chat=chat, message=message, budget_tokens=400, now=pool.now
                        )
                        counts.append(len(result.items) - result.core_count)
            row["generic turns"] = len(counts)
            row["generic: mean query-chosen items"] = round(float(np.mean(counts)), 2)
            row["generic: % with 8 or more"] = round(
                100 * float(np.mean([c >= 8 for c in counts])), 1
            )
            out[label] = row
            print(label, row, flush=True)
    return out


def render(results: dict[str, Any]) -> str:
    """A markdown table: one row per variant."""
    keys = list(next(iter(results.values())))
    lines = [
        "# The nearest fill's margin: block at 400 tokens and generic turns",
        "",
        "Block = share of the question's evidence in the inlet's block (all questions, %); "
        "generic = query-chosen items injected for requests about nothing the user said.",
        "",
        "| variant | " + " | ".join(keys) + " |",
        "|---|" + "---:|" * len(keys),
    ]
    lines += [f"| {k} | " + " | ".join(str(v[c]) for c in keys) + " |" for k, v in results.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure every variant and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefeval", type=Path, default=Path("../shared/data/prefeval"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    results = asyncio.run(measure(args.prefeval))
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(render(results))


if __name__ == "__main__":
    main()
