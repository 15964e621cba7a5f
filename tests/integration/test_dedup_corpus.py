"""The near-duplicate guard measured on its corpus with the real embedding model.

Counts are printed (`pytest -s`) and reported in docs/reliability.md; the founding rule
(ratio > 0.95 or cosine > 0.97 alone) is measured beside it.
"""

from __future__ import annotations

from service.core import dedup
from service.embeddings.encoder import Encoder
from tests.support.dedup_corpus import DIFFERENT, OTHER_WORD, SAME

THRESHOLDS = {"text_threshold": 0.95, "cosine_threshold": 0.97}


def _merged(encoder: Encoder, pairs: list[tuple[str, str]]) -> tuple[int, int]:
    """(merged by the guard, merged by similarity alone) over `pairs`."""
    guard = similarity = 0
    for stored, proposed in pairs:
        vectors = encoder.encode_sync([stored, proposed])
        cosine = float(vectors[0] @ vectors[1])
        guard += dedup.same_fact(proposed, stored, cosine, **THRESHOLDS)
        similarity += cosine > 0.97 or dedup.text_ratio(proposed, stored) > 0.95
    return guard, similarity


def test_the_guard_merges_restatements_and_keeps_look_alikes_apart(encoder: Encoder) -> None:
    same, same_before = _merged(encoder, SAME)
    different, different_before = _merged(encoder, DIFFERENT)
    other, other_before = _merged(encoder, OTHER_WORD)
    print(
        f"\nrestatements merged: {same}/{len(SAME)} (similarity alone: {same_before})"
        f"\nlook-alikes (number, date, name, negation) kept apart: "
        f"{len(DIFFERENT) - different}/{len(DIFFERENT)} "
        f"(similarity alone: {len(DIFFERENT) - different_before})"
        f"\nlook-alikes (another word) kept apart: {len(OTHER_WORD) - other}/{len(OTHER_WORD)}"
        f" (similarity alone: {len(OTHER_WORD) - other_before})"
    )
    assert (len(SAME), len(DIFFERENT), len(OTHER_WORD)) == (42, 46, 18)
    assert (same, different, other) == (39, 0, 0)
    assert (same_before, different_before, other_before) == (28, 24, 0)
