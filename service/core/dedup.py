"""Near-duplicate detection before insert (DESIGN §5.4).

A new fact is a duplicate of an existing one when the two do not disagree (see `disagree`)
and either the texts match with a normalized Levenshtein ratio above 0.95, the embeddings'
cosine similarity is above 0.97 (thresholds of the founding design, seeds/001), or the new
fact is a rewording: cosine ≥ 0.90 and the same words, whatever their order, at a token-set
ratio ≥ 0.90 (ours, measured on `tests/support/dedup_corpus.py`, figures in
docs/reliability.md).

Similarity never decides between facts that disagree: two texts that differ in a number, a
date, a name or a negation are different facts however close they look ("User has a sister
named Jane" / "… Jana", "User was born in 1988" / "… 1989", "User eats meat" / "User does
not eat meat"). And an UPDATE whose text differs from its target in any way is a correction
(`is_unchanged`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from rapidfuzz import fuzz

from service.core.records import Memory

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+", re.UNICODE)

REWORD_COSINE = 0.90
"""Cosine from which a fact with the same words (token-set ratio) is a rewording (ours)."""
REWORD_TOKEN_RATIO = 0.90
"""Token-set ratio (word order ignored) a rewording needs besides `REWORD_COSINE` (ours)."""

_NUMBER_WORDS = {
    word: str(value)
    for value, words in enumerate(
        [
            "zero null zéro",
            "one eins",
            "two twice zwei deux dos",
            "three drei trois tres",
            "four vier quatre cuatro",
            "five fünf cinq cinco",
            "six sechs seis",
            "seven sieben sept siete",
            "eight acht huit ocho",
            "nine neun neuf nueve",
            "ten zehn dix diez",
            "eleven elf onze",
            "twelve zwölf douze doce",
        ]
    )
    for word in words.split()
}
"""Number words read as digits, so "two children" and "2 children" agree. Words that are
also articles ("un", "une", "uno") are left out: they would make every "a" a number."""

_DATE_WORDS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec "
    "monday tuesday wednesday thursday friday saturday sunday "
    "januar februar märz juni juli oktober dezember montag dienstag mittwoch donnerstag "
    "freitag samstag sonntag janvier février mars avril mai juin juillet août septembre "
    "octobre novembre décembre lundi mardi mercredi jeudi vendredi samedi dimanche "
    "today tomorrow yesterday weekend".split()
)
"""Month and weekday names (English, German, French): facts dated differently disagree."""

_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|neither|nor|cannot|without|"
    r"nicht|kein\w*|nie|niemals|pas|jamais|rien|nunca|nada)\b|n't\b|\bn'",
    re.IGNORECASE | re.UNICODE,
)
"""Negation markers (English, German, French, Spanish; "no longer" counts as "no")."""


def normalize_text(text: str) -> str:
    """Case-folded, NFC, punctuation-free, single-spaced text for comparison."""
    text = unicodedata.normalize("NFC", text).casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", text)).strip()


def text_ratio(a: str, b: str) -> float:
    """Similarity of two texts in [0, 1] (rapidfuzz ratio of the normalized texts)."""
    return float(fuzz.ratio(normalize_text(a), normalize_text(b))) / 100.0


def token_ratio(a: str, b: str) -> float:
    """Similarity of two texts' words in [0, 1], order ignored (rapidfuzz token-set ratio)."""
    return float(fuzz.token_set_ratio(normalize_text(a), normalize_text(b))) / 100.0


def is_unchanged(new: str, old: str) -> bool:
    """True when an UPDATE's text is its target's, up to spacing (nothing to correct)."""
    return (
        _SPACE.sub(" ", unicodedata.normalize("NFC", new)).strip()
        == _SPACE.sub(" ", unicodedata.normalize("NFC", old)).strip()
    )


def _words(text: str) -> list[str]:
    """Words of `text`, case-folded, number words as digits."""
    words = _WORD.findall(unicodedata.normalize("NFC", text).casefold())
    return [_NUMBER_WORDS.get(w, w) for w in words]


def _names(text: str) -> set[str]:
    """Case-folded words written with a capital inside the sentence (names, places, brands).

    The first word is skipped (every sentence starts with one), and so is a text without
    lower-case letters or without capitals (then case tells nothing).
    """
    text = unicodedata.normalize("NFC", text)
    if text.upper() == text or text.lower() == text:
        return set()
    found = _WORD.findall(text)
    return {w.casefold() for w in found[1:] if w[0].isupper()}


def has_negation(text: str) -> bool:
    """True when `text` holds a negation marker (`_NEGATION`)."""
    return _NEGATION.search(unicodedata.normalize("NFC", text)) is not None


def words(text: str) -> set[str]:
    """The distinct words of `text` as `disagree` compares them: case-folded, NFC, number
    words as digits.
    """
    return set(_words(text))


def distinguishing_words(text: str) -> set[str]:
    """Words of `text` (as `words` gives them) that make a different fact when only one of
    two texts has them: those holding a digit, month and weekday names, and the words
    capitalized inside the sentence (names, places, brands).
    """
    names = _names(text)
    return {
        word
        for word in _words(text)
        if any(ch.isdigit() for ch in word) or word in _DATE_WORDS or word in names
    }


def disagree(a: str, b: str) -> bool:
    """True when two facts differ in a number, a date, a name or a negation (DESIGN §5.4).

    The words one text has and the other lacks decide: a digit in them (numbers, years, ISO
    dates, "4th"), a month or weekday name, or a word capitalized inside either sentence;
    and a negation in one text but not the other.
    """
    if has_negation(a) != has_negation(b):
        return True
    differing = set(_words(a)) ^ set(_words(b))
    if not differing:
        return False
    names = _names(a) | _names(b)
    return any(
        any(ch.isdigit() for ch in word) or word in _DATE_WORDS or word in names
        for word in differing
    )


def same_fact(
    a: str, b: str, cosine: float, *, text_threshold: float, cosine_threshold: float
) -> bool:
    """True when `a` restates `b`: close in text or meaning, or reworded, and not disagreeing.

    Args:
        a, b: the two facts.
        cosine: their embeddings' cosine similarity, in [-1, 1].
        text_threshold: normalized ratio above which texts are the same (0.95, seeds/001).
        cosine_threshold: cosine above which meanings are the same (0.97, seeds/001).
    """
    if disagree(a, b):
        return False
    if cosine > cosine_threshold or text_ratio(a, b) > text_threshold:
        return True
    return cosine >= REWORD_COSINE and token_ratio(a, b) >= REWORD_TOKEN_RATIO


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
    """The first existing memory that `content` restates (`same_fact`), or None.

    Args:
        content: the proposed fact.
        neighbours: (memory, cosine similarity in [-1, 1] to `content`) pairs.
        text_threshold: ratio above which texts are the same (0.95).
        cosine_threshold: cosine above which meanings are the same (0.97).
    """
    for memory, cosine in neighbours:
        if same_fact(
            content,
            memory.content,
            cosine,
            text_threshold=text_threshold,
            cosine_threshold=cosine_threshold,
        ):
            return memory
    return None


def restated_deletes(
    deletes: Iterable[tuple[str, str]],
    restated: Iterable[tuple[str, str, float]],
    *,
    text_threshold: float,
    cosine_threshold: float,
) -> set[str]:
    """Refs of DELETEs whose memory the same answer states again; those DELETEs are dropped.

    A user who restates a fact has not retracted it, whatever else the LLM proposed; a
    restatement that disagrees with the memory ("User does not live in Berlin") is no
    restatement, so its DELETE stands.

    Args:
        deletes: (ref, the memory's text) of each proposed DELETE.
        restated: (ref of a DELETE's memory, a NEW or UPDATE text of the same answer, their
            cosine) pairs to check.
        text_threshold, cosine_threshold: as for `same_fact`.
    """
    targets = dict(deletes)
    return {
        ref
        for ref, text, cosine in restated
        if ref in targets
        and same_fact(
            text,
            targets[ref],
            cosine,
            text_threshold=text_threshold,
            cosine_threshold=cosine_threshold,
        )
    }
