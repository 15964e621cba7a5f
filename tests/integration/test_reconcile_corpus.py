"""The write path's reconciliation rules (`service/core/reconcile.py`) measured on their
corpus, tests/corpora/reconcile.json, with the real embedding model.

Thresholds were chosen on the `tune` half; the figures asserted here are the `report`
half's, per class, as docs/performance.md ("Extraction with sloppy models") states them
(`pytest -s` prints both halves).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from service.core import reconcile
from service.core.reconcile import Relation
from service.embeddings.encoder import Encoder

CORPUS = json.loads((Path(__file__).parents[1] / "corpora" / "reconcile.json").read_text())
PAIRS = CORPUS["pairs"]
EXPECTED = {
    "contradiction": Relation.CONTRADICTS,
    "paraphrase": Relation.SAME,
    "separate": Relation.SEPARATE,
}


def _scores(encoder: Encoder, split: str) -> tuple[Counter[str], Counter[str], dict[str, int]]:
    """(right per class, pairs per class, extra figures) on one half."""
    pairs = [p for p in PAIRS if p["split"] == split]
    texts = sorted(
        {t for p in pairs for k in ("old", "new", "user", "assistant") if (t := p.get(k))}
    )
    vectors = dict(zip(texts, np.asarray(encoder.encode_sync(texts)), strict=True))

    def cos(a: str, b: str) -> float:
        return float(vectors[a] @ vectors[b])

    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    extra = {"wrong_supersede": 0, "wrong_merge": 0, "updates_kept": 0, "updates": 0}
    for pair in pairs:
        kind = pair["class"]
        total[kind] += 1
        new = pair["new"]
        if kind in EXPECTED:
            found = reconcile.relation(new, pair["old"], cos(new, pair["old"]))
            right[kind] += found is EXPECTED[kind]
            if kind == "separate":
                extra["wrong_supersede"] += found is Relation.CONTRADICTS
                extra["wrong_merge"] += found is Relation.SAME
            if kind == "contradiction":
                extra["updates"] += 1
                extra["updates_kept"] += reconcile.on_topic(new, pair["old"], cos(new, pair["old"]))
        elif kind == "off_target":
            right[kind] += not reconcile.on_topic(new, pair["old"], cos(new, pair["old"]))
        else:
            support = reconcile.supported(
                new,
                [pair["user"]],
                [pair["assistant"]],
                user_cosine=cos(new, pair["user"]),
                assistant_cosine=cos(new, pair["assistant"]),
            )
            right[kind] += support.backed == (kind == "supported")
    return right, total, extra


def test_the_corpus_has_the_classes_and_halves_it_claims() -> None:
    sizes = Counter(p["class"] for p in PAIRS)
    assert sizes["contradiction"] >= 60 and sizes["paraphrase"] >= 60 and sizes["separate"] >= 60
    assert {p["split"] for p in PAIRS} == {"tune", "report"}
    for kind in ("contradiction", "paraphrase", "separate", "off_target"):
        halves = Counter(p["split"] for p in PAIRS if p["class"] == kind)
        assert abs(halves["tune"] - halves["report"]) <= 1
    assert any(not p["new"].isascii() for p in PAIRS)  # German, French, Spanish pairs


def test_reconciliation_figures_on_the_report_half(encoder: Encoder) -> None:
    for split in ("tune", "report"):
        right, total, extra = _scores(encoder, split)
        print(f"\n{split}: " + ", ".join(f"{k} {right[k]}/{total[k]}" for k in sorted(total)))
        print(f"{split}: {extra}")
    assert dict(right) == {
        "contradiction": 32,
        "paraphrase": 25,
        "separate": 32,
        "off_target": 14,
        "supported": 10,
        "unsupported": 5,
    }
    assert dict(total) == {
        "contradiction": 33,
        "paraphrase": 32,
        "separate": 32,
        "off_target": 15,
        "supported": 10,
        "unsupported": 5,
    }
    # what costs most: a look-alike superseding or merging into another fact
    assert extra == {"wrong_supersede": 0, "wrong_merge": 0, "updates_kept": 33, "updates": 33}


def test_what_qwen_answered_against_the_local_server_is_reconciled(encoder: Encoder) -> None:
    """Qwen2.5-Coder-1.5B through llama-cpp-python (schema_object mode, 2026-12-04) answered
    a NEW where an UPDATE of the shown "User works at Falcon Logistics" belonged; the write
    path still replaces the old employer, and both of its facts are backed by the messages."""
    messages = [
        "I finally adopted a dog last weekend, a rescue greyhound called Biscuit.",
        "Also I start at Heron Freight on Monday as a dispatcher. My sister Oona hates dogs "
        "though, so visits will be fun.",
    ]
    answered = [
        "User adopted a dog Biscuit last weekend",
        "User starts at Heron Freight on Monday as a dispatcher",
    ]
    vectors = np.asarray(encoder.encode_sync([*answered, "User works at Falcon Logistics"]))
    assert (
        reconcile.relation(
            answered[1], "User works at Falcon Logistics", float(vectors[1] @ vectors[2])
        )
        is Relation.CONTRADICTS
    )
    message_vectors = np.asarray(encoder.encode_sync(messages))
    for fact, vector in zip(answered, vectors, strict=False):
        support = reconcile.supported(
            fact,
            messages,
            [],
            user_cosine=float(max(message_vectors @ vector)),
            assistant_cosine=0.0,
            user_name="Noor",
        )
        assert support.backed, fact
