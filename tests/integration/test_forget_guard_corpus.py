"""A forget guard's fingerprint (keyed digests, no text) recognises the forgotten memory said
again as `dedup.same_fact` does, measured on the dedup corpus with the real embedding model.

Counts are printed (`pytest -s`) and reported in docs/discussions/durable-turns.md.
"""

from __future__ import annotations

from service.core import dedup, forget_guard
from service.embeddings.encoder import Encoder
from tests.support.dedup_corpus import DIFFERENT, OTHER_WORD, REWORDED, SAME

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
        40,
        0,
        0,
    )
    # pair by pair: every restatement same_fact finds (and one more, by meaning), and not one
    # look-alike
    assert all(g for g, s in same if s)
    assert [g for g, _ in different + other] == [s for _, s in different + other]


def test_restatements_in_other_words_are_recognised(encoder: Encoder) -> None:
    """Before the meaning check, 2 of these 10 were recognised (the guard followed same_fact
    only); the two that trade a content word for a synonym still pass it by."""
    reworded = _decisions(encoder, REWORDED)
    print(f"\nreworded restatements recognised: {sum(g for g, _ in reworded)}/{len(REWORDED)}")
    assert [g for g, _ in reworded] == [True] * 8 + [False] * 2


def test_the_meaning_cosine_sits_on_a_plateau(encoder: Encoder) -> None:
    """From 0.80 to MEANING_COSINE the corpus decides alike: no look-alike taken, every
    REWORDED pair without a synonym recognised; above 0.855 the first rewording is lost."""
    pairs = REWORDED + DIFFERENT + OTHER_WORD
    cosines = [float(v[0] @ v[1]) for v in (encoder.encode_sync([a, b]) for a, b in pairs)]
    memories = [forget_guard.fingerprint(a, KEY) for a, _ in pairs]

    def taken(threshold: float) -> list[bool]:
        original = forget_guard.MEANING_COSINE
        forget_guard.MEANING_COSINE = threshold
        try:
            return [
                forget_guard.restates(b, c, m, KEY, cosine_threshold=COSINE)
                for (_, b), c, m in zip(pairs, cosines, memories, strict=True)
            ]
        finally:
            forget_guard.MEANING_COSINE = original

    expected = [True] * 8 + [False] * 2 + [False] * (len(DIFFERENT) + len(OTHER_WORD))
    for threshold in (0.80, 0.82, 0.84, forget_guard.MEANING_COSINE):
        assert taken(threshold) == expected, threshold
    assert taken(0.86)[:8] != [True] * 8
