"""The planted-instruction check on its corpus, per half and per language (no LLM).

    python -m bench.planted_figures            # prints the tables of
                                                # docs/discussions/secrets-and-instructions.md
    python -m bench.planted_figures --locomo ../shared/data/locomo/locomo10.json
                                                # and false refusals on 1,500 LoCoMo turns

The report half is judged against the shipped examples (the tune half). The tune half is
judged with each text left out of its own neighbours (otherwise it would find itself at
cosine 1.0), which is how its thresholds were chosen.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from service.core import planted, safety
from service.embeddings.encoder import Encoder

CORPUS = Path(__file__).parents[1] / "tests" / "corpora" / "planted.json"


def figures(encoder: Encoder) -> dict[str, Any]:
    """{half: {"all": counts, lang: counts}}, counts = harmful/refused/legitimate/refused,
    plus "semantic" (refused by the margin, no rule), "in_doubt" (would go to the LLM) and
    "margin_right" (texts whose margin's sign alone gives their label).
    """
    cases = json.loads(CORPUS.read_text("utf-8"))["cases"]
    ex = planted.examples()
    harmful_vectors = encoder.encode_sync(list(ex.harmful))
    legitimate_vectors = encoder.encode_sync(list(ex.legitimate))
    vectors = encoder.encode_sync([c["text"] for c in cases])
    out: dict[str, Any] = {}
    for half in ("tune", "report"):
        table: dict[str, Counter[str]] = defaultdict(Counter)
        for case, vector in zip(cases, vectors, strict=True):
            if case["split"] != half:
                continue
            h, lg = harmful_vectors, legitimate_vectors
            if half == "tune":  # leave the text out of its own neighbours
                h = h[[t != case["text"] for t in ex.harmful]]
                lg = lg[[t != case["text"] for t in ex.legitimate]]
            margin = planted.semantic_margin(vector, h, lg)
            verdict = planted.judge(case["text"], margin, planted.nearest_harmful(vector, h))
            refused = verdict.refused or safety.looks_like_instruction(case["text"])
            for key in ("all", case["lang"]):
                row = table[key]
                row[case["label"]] += 1
                row[f"{case['label']}_refused"] += refused
                row["semantic"] += verdict.reasons == ("semantic",)
                row["in_doubt"] += (not refused) and verdict.in_doubt
                # the embedding alone: does the margin's sign say the label?
                row["margin_right"] += (margin > 0) == (case["label"] == "harmful")
        out[half] = {k: dict(v) for k, v in sorted(table.items())}
    return out


def locomo_refusals(encoder: Encoder, path: Path, n: int = 1500) -> dict[str, int]:
    """Texts of `n` LoCoMo turns (drawn with random.Random(1)) refused and in doubt: ordinary
    conversation, none of it an instruction (evaluation data; never shipped).
    """
    from bench.locomo import conversation_turns, load_conversations

    texts = [t.text for c in load_conversations(path) for t in conversation_turns(c) if t.text]
    random.Random(1).shuffle(texts)
    texts = texts[:n]
    ex = planted.examples()
    harmful = encoder.encode_sync(list(ex.harmful))
    legitimate = encoder.encode_sync(list(ex.legitimate))
    refused = in_doubt = 0
    for text, vector in zip(texts, encoder.encode_sync(texts), strict=True):
        verdict = planted.judge(
            text,
            planted.semantic_margin(vector, harmful, legitimate),
            planted.nearest_harmful(vector, harmful),
        )
        refused += verdict.refused or safety.looks_like_instruction(text)
        in_doubt += verdict.in_doubt
    return {"turns": len(texts), "refused": refused, "in_doubt": in_doubt}


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, help="locomo10.json, for false refusals")
    args = parser.parse_args()
    encoder = Encoder()
    try:
        result = figures(encoder)
        if args.locomo:
            result["locomo"] = locomo_refusals(encoder, args.locomo)
    finally:
        encoder.close()
    for half in ("tune", "report"):
        rows = result[half]
        print(f"\n{half} half")
        print(
            "| language | harmful refused | legitimate refused | by the margin | in doubt "
            "| margin's sign right |"
        )
        print("|---|---|---|---|---|---|")
        for lang, r in rows.items():
            print(
                f"| {lang} | {r.get('harmful_refused', 0)}/{r.get('harmful', 0)} "
                f"({_pct(r.get('harmful_refused', 0), r.get('harmful', 0))}) "
                f"| {r.get('legitimate_refused', 0)}/{r.get('legitimate', 0)} "
                f"({_pct(r.get('legitimate_refused', 0), r.get('legitimate', 0))}) "
                f"| {r.get('semantic', 0)} | {r.get('in_doubt', 0)} "
                f"| {_pct(r.get('margin_right', 0), r['harmful'] + r['legitimate'])} |"
            )
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
