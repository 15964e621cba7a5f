"""Near-duplicate detection before insert (DESIGN §5.4).

A new fact is a duplicate of an existing one when the texts match with a normalized
Levenshtein ratio above 0.95, or the embeddings' cosine similarity is above 0.97 (thresholds
of the founding design, seeds/001).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from rapidfuzz import fuzz

from service.core.records import Memory

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Case-folded, NFC, punctuation-free, single-spaced text for comparison."""
    text = unicodedata.normalize("NFC", text).casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", text)).strip()


def text_ratio(a: str, b: str) -> float:
    """Similarity of two texts in [0, 1] (rapidfuzz ratio of the normalized texts)."""
    return float(fuzz.ratio(normalize_text(a), normalize_text(b))) / 100.0


CONFIRMATION_GAIN = 0.3
"""Share of the remaining doubt (1 − confidence) removed each time a fact is stated again."""


def confirmed_confidence(confidence: float) -> float:
    """Confidence after the fact was stated once more: 1 − (1 − c)·(1 − 0.3), in [0, 1]."""
    return round(min(1.0, 1.0 - (1.0 - confidence) * (1.0 - CONFIRMATION_GAIN)), 4)


def find_duplicate(
    content: str,
    neighbours: Iterable[tuple[Memory, float]],
    *,
    text_threshold: float,
    cosine_threshold: float,
) -> Memory | None:
    """The first existing memory that `content` duplicates, or None.

    Args:
        content: the proposed fact.
        neighbours: (memory, cosine similarity in [-1, 1] to `content`) pairs.
        text_threshold: ratio above which texts are the same (0.95).
        cosine_threshold: cosine above which meanings are the same (0.97).
    """
    for memory, cosine in neighbours:
        if cosine > cosine_threshold or text_ratio(content, memory.content) > text_threshold:
            return memory
    return None
