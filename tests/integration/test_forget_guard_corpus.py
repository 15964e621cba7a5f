"""A forget guard's fingerprint (keyed digests, no text) recognises the forgotten memory said
again as `dedup.same_fact` does, measured on the dedup corpus with the real embedding model.

Counts are printed (`pytest -s`) and reported in docs/discussions/durable-turns.md.
"""

from __future__ import annotations

from service.core import dedup, forget_guard
from service.embeddings.encoder import Encoder
from tests.support.dedup_corpus import DIFFERENT, OTHER_WORD, SAME

KEY = bytes(range(32))
COSINE = 0.97


def _decisions(encoder: Encoder, pairs: list[tuple[str, str]]) -> list[tuple[bool, bool]]:
    """(the guard says restated, same_fact says restated) for each (forgotten, proposed)."""
    found = []
    for forgotten, proposed in pairs:
        vectors = encoder.encode_sync([forgotten, proposed])
        cosine = float(vectors[0] @ vectors[1])
        memory = forget_guard.fingerprint(forgotten, KEY)
        found.append(
            (
                forget_guard.restates(proposed, cosine, memory, KEY, cosine_threshold=COSINE),
                dedup.same_fact(
                    proposed, forgotten, cosine, text_threshold=0.95, cosine_threshold=COSINE
                ),
            )
        )
    return found


def test_the_fingerprint_decides_as_same_fact_on_the_dedup_corpus(encoder: Encoder) -> None:
    same = _decisions(encoder, SAME)
    different = _decisions(encoder, DIFFERENT)
    other = _decisions(encoder, OTHER_WORD)
    print(
        f"\nrestatements recognised: {sum(g for g, _ in same)}/{len(SAME)} "
        f"(same_fact: {sum(s for _, s in same)})"
        f"\nlook-alikes (number, date, name, negation) taken for it: "
        f"{sum(g for g, _ in different)}/{len(DIFFERENT)}"
        f"\nlook-alikes (another word) taken for it: {sum(g for g, _ in other)}/{len(OTHER_WORD)}"
    )
    assert (len(SAME), len(DIFFERENT), len(OTHER_WORD)) == (42, 46, 18)
    assert (sum(g for g, _ in same), sum(g for g, _ in different), sum(g for g, _ in other)) == (
        39,
        0,
        0,
    )
    # pair by pair, not only in total
    assert [g for g, _ in same + different + other] == [s for _, s in same + different + other]
