"""Wallet seed phrases: a run of words from a BIP-39 word list (PyPI `mnemonic`, the
reference implementation, ships the twelve lists).

A BIP-39 phrase is 12, 15, 18, 21 or 24 words of one list. Ordinary prose never has twelve
such words in a row: the lists leave out "the", "and", "is", "to", "of" and the other
function words. A run is counted over words separated by blanks, commas or list numbering
("1. abandon 2. ability …"), so a phrase pasted as a numbered list is found too; one word
outside the list (a typo) does not end a run. Words drawn at random rarely repeat, so a run
with many repeats ("word word word …") is not taken for a phrase.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import cache, lru_cache

from mnemonic import Mnemonic

MIN_WORDS = 12
"""The shortest BIP-39 phrase (128 bits of entropy)."""

# Latin, Cyrillic, Hangul and kana words; separators are blanks (the ideographic space of
# Japanese phrases too), commas, hyphens and list numbers.
_WORD = re.compile(r"(?:[^\W\d_]|[\u0300-\u036f\u3099\u309a])+")  # combining marks of NFD text too
_GAP = re.compile(r"(?:[\s,;\-\u3000]|\d{1,2}[.)]?)*$")


@lru_cache(maxsize=65536)
def _fold(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@cache
def _words() -> frozenset[str]:
    """Every word of every list, case- and accent-folded (2048 words a language)."""
    return frozenset(
        _fold(word)
        for language in Mnemonic.list_languages()
        for word in Mnemonic(language).wordlist
    )


def seed_phrase_spans(text: str) -> Iterator[tuple[int, int]]:
    """Character spans of the BIP-39-like runs of at least `MIN_WORDS` words in `text`."""
    if len(text.split()) < MIN_WORDS and text.count(",") < MIN_WORDS - 1:
        return  # too few words for a phrase (the common case, checked cheaply)
    words = _words()
    run: list[re.Match[str]] = []  # the words of the current run, one miss allowed
    misses = 0
    previous_end = 0
    for match in _WORD.finditer(text):
        joined = not run or _GAP.match(text, previous_end, match.start()) is not None
        previous_end = match.end()
        listed = _fold(match.group(0)) in words
        if run and (not joined or (not listed and misses)):
            yield from _closed(run, words)
            run, misses = [], 0
        if listed:
            run.append(match)
        elif run:
            misses += 1
            run.append(match)
    yield from _closed(run, words)


def _closed(run: list[re.Match[str]], words: frozenset[str]) -> Iterator[tuple[int, int]]:
    """The span of `run` from its first to its last listed word, when it has enough."""
    if len(run) < MIN_WORDS:
        return
    hits = [m for m in run if _fold(m.group(0)) in words]
    # words drawn at random from 2048 rarely repeat; "word word word …" is no phrase
    distinct = len({_fold(m.group(0)) for m in hits})
    if len(hits) >= MIN_WORDS and distinct >= max(MIN_WORDS - 2, len(hits) * 3 // 4):
        yield hits[0].start(), hits[-1].end()
