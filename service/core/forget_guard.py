"""What a forgotten memory leaves behind for the turns accepted before its forget.

A turn queued before a forget and extracted after it was never shown the forgotten memory
(it is gone when the extraction reads), yet its message may say the same fact again: written,
it would bring the memory back (DESIGN §5.6: a forgotten memory's content is never written
again). So the forget leaves each such turn a *fingerprint* of the memory, and the
extraction drops a fact of that turn that restates it. A fingerprint holds no text: keyed
digests (HMAC-SHA-256 with an installation secret) of the memory's normalized text, of its
words and of its distinguishing words, and whether it is negated; the forget stores the
memory's vector beside it. Both go when the turn is closed.

`restates` follows `dedup.same_fact` on these digests, so a correction in the queued turn
("… named Max" after forgetting "… named Rex") is not taken for the forgotten fact:

- facts that disagree (a negation in one only, or a distinguishing word only one has) are
  different facts;
- otherwise a fact restates the memory when the cosine of their vectors is above the dedup
  threshold, their normalized texts are the same, or it is a rewording: cosine ≥
  `dedup.REWORD_COSINE` and one's words are nearly all the other's (`REWORD_OVERLAP`; the
  digests allow set overlap only, instead of rapidfuzz's token-set ratio);
- or it says the same in other words (`MEANING_COSINE`): the cosine is at least that and
  neither text replaced a content word of the other — one's content words (stems, without
  function words and the verbs of having, being and naming) hold all of the other's. "Rex
  is the user's dog" restates "User has a dog named Rex"; "User has an older sister" does
  not restate "User has a younger sister" (cosine 0.97, but "older" replaced "younger").
  Restructured sentences are what a user says again in other words; look-alikes that
  differ in an ordinary word always replace one, so similarity alone never merges them.

Measured against `dedup.same_fact` on `tests/support/dedup_corpus.py` in
`tests/integration/test_forget_guard_corpus.py` (figures in docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from service.core import dedup

__all__ = [
    "MEANING_COSINE",
    "REWORD_OVERLAP",
    "SECRET_NAME",
    "Fingerprint",
    "content_stems",
    "fingerprint",
    "restates",
    "text_digest",
]

SECRET_NAME = "forget_guard"
"""Name of the installation secret that keys the digests (storage/installation.py)."""

REWORD_OVERLAP = 0.75
"""Share of the shorter text's words the other must hold for a rewording (ours; with
`dedup.REWORD_COSINE`, the middle of the plateau 0.70–0.80 on tests/support/dedup_corpus.py,
where the guard agrees with `dedup.same_fact` on every pair)."""

MEANING_COSINE = 0.85
"""Cosine from which a fact whose content words hold the forgotten memory's (or the other
way round) says it again (ours: the lowest rewording of `tests/support/dedup_corpus.py`'s
REWORDED is 0.855, the look-alikes that keep their content words are all disagreeing ones;
tests/integration/test_forget_guard_corpus.py prints the sweep, docs/reliability.md)."""

#: words that carry no content of a fact: articles, pronouns, prepositions and the verbs of
#: having, being and naming a reworded fact trades for one another (ours)
_FUNCTION_WORDS = frozenset(
    "a an the user user's s is are was were be been being am has have had having own owns "
    "owned owning owner named name names called call goes go by known as of to in on at "
    "for from with and or who which that where this it its their them they his her he she "
    "there here than".split()
)
_SUFFIXES = ("ies", "ing", "es", "ed", "s")

_DIGEST_CHARS = 32  # 128 bits of HMAC-SHA-256: no collision among a memory's few words


def _digest(key: bytes, value: str) -> str:
    return hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()[:_DIGEST_CHARS]


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """A forgotten memory as keyed digests: enough to recognise it said again, no text."""

    text: str  #: digest of the normalized text (`dedup.normalize_text`)
    words: frozenset[str]  #: digests of its words (`dedup.words`)
    distinguishing: frozenset[str]  #: digests of its distinguishing words
    negated: bool  #: it holds a negation
    #: digests of its content stems (`content_stems`); None in guards written before them
    content: frozenset[str] | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON object (sorted digest lists), as the guard table stores it."""
        data: dict[str, Any] = {
            "text": self.text,
            "words": sorted(self.words),
            "distinguishing": sorted(self.distinguishing),
            "negated": self.negated,
        }
        if self.content is not None:
            data["content"] = sorted(self.content)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fingerprint:
        """The fingerprint `to_json` wrote.

        Raises:
            KeyError, TypeError: `data` is not such an object.
        """
        return cls(
            text=str(data["text"]),
            words=frozenset(str(w) for w in data["words"]),
            distinguishing=frozenset(str(w) for w in data["distinguishing"]),
            negated=bool(data["negated"]),
            content=(frozenset(str(w) for w in data["content"]) if "content" in data else None),
        )


def content_stems(content: str) -> set[str]:
    """The content words of a fact (`dedup.words` without `_FUNCTION_WORDS`), stemmed by
    dropping a plural, -ing or -ed ending and a final "e": "nursing" and "nurse" are one.
    """
    stems = set()
    for word in dedup.words(content) - _FUNCTION_WORDS:
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
                break
        stems.add(word[:-1] if word.endswith("e") and len(word) > 3 else word)
    return stems


def text_digest(content: str, key: bytes) -> str:
    """The keyed digest of a memory's normalized text (`dedup.normalize_text`): what a
    forgotten Personal memory leaves so an import can tell it is the same text, no text.
    """
    return _digest(key, dedup.normalize_text(content))


def fingerprint(content: str, key: bytes) -> Fingerprint:
    """The fingerprint of a memory's text under the installation's `key`."""
    return Fingerprint(
        text=_digest(key, dedup.normalize_text(content)),
        words=frozenset(_digest(key, w) for w in dedup.words(content)),
        distinguishing=frozenset(_digest(key, w) for w in dedup.distinguishing_words(content)),
        negated=dedup.has_negation(content),
        content=frozenset(_digest(key, w) for w in content_stems(content)),
    )


def restates(
    content: str, cosine: float, memory: Fingerprint, key: bytes, *, cosine_threshold: float
) -> bool:
    """Does the proposed fact `content` say the forgotten memory again?

    Args:
        content: the proposed fact (NEW or UPDATE text).
        cosine: cosine similarity of its vector and the memory's, in [-1, 1].
        memory: the memory's fingerprint, made with the same `key`.
        cosine_threshold: the dedup cosine (MEMORY_DEDUP_COSINE, 0.97).
    """
    if dedup.has_negation(content) != memory.negated:
        return False
    words = {_digest(key, w) for w in dedup.words(content)}
    distinguishing = {_digest(key, w) for w in dedup.distinguishing_words(content)}
    differing = words ^ memory.words
    if differing & (distinguishing | memory.distinguishing):
        return False
    if cosine > cosine_threshold or _digest(key, dedup.normalize_text(content)) == memory.text:
        return True
    shorter = min(len(words), len(memory.words))
    overlap = len(words & memory.words) / shorter if shorter else 0.0
    if cosine >= dedup.REWORD_COSINE and overlap >= REWORD_OVERLAP:
        return True
    if memory.content is None or cosine < MEANING_COSINE:
        return False
    stems = {_digest(key, w) for w in content_stems(content)}
    return bool(stems) and (stems <= memory.content or memory.content <= stems)
