"""Long memories scored by their best sentence (issue 28 item 3, docs/discussions/retrieval.md).

A memory's one vector averages all it says: an 803-character note whose last sentence
answers the question scored relevance 0.589 as a whole, below both cut-offs, while that
sentence alone scored 0.765. So a long candidate's relevance is the best of its own and its
sentences' (`best_of`), each sentence embedded on the query lane and cached by the encoder:
a bank pays once per sentence and process, not per turn.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from service.core.records import Candidate

LONG_MEMORY_CHARS = 300
"""Memories longer than this are also scored by their sentences: about three facts of the
extraction's length (its memories are one sentence of 40–120 characters, so none of them is
touched; imports and `/memory add` notes are)."""

MIN_SENTENCE_CHARS = 12
"""Shorter pieces ("Yes.", "Thanks!") are left out: their vectors say nothing of the note."""

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")


def sentences(text: str) -> list[str]:
    """The sentences of `text` (split after . ! ? … and at line breaks), each stripped,
    without those shorter than MIN_SENTENCE_CHARS; [] when there is only one.
    """
    parts = [p.strip() for p in _SENTENCE_END.split(text)]
    kept = [p for p in parts if len(p) >= MIN_SENTENCE_CHARS]
    return kept if len(kept) > 1 else []


def is_long(candidate: Candidate, *, min_chars: int) -> bool:
    """True when the candidate's text is long enough to be scored by its sentences."""
    return min_chars > 0 and len(candidate.memory.content) > min_chars


def best_of(candidate: Candidate, sentence_cosines: Sequence[float]) -> Candidate:
    """The candidate with its cosine raised to its best sentence's (never lowered), and its
    similarity 1 − cosine_distance / 2 = (1 + cosine) / 2 from that (seeds/001).
    """
    best = max(sentence_cosines, default=candidate.cosine)
    if best <= candidate.cosine:
        return candidate
    return dataclasses.replace(
        candidate, cosine=float(best), similarity=max(0.0, min(1.0, (1.0 + float(best)) / 2.0))
    )
