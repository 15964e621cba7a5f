"""First-person memories written by the user, turned to the third person (pure).

A memory is injected under "I recall the following about you:", where "I" is the assistant;
`/memory add I am allergic to penicillin` stored as typed would read as the assistant's own
allergy. Memories the extractor writes already say "User …"; this makes typed ones say so too:

    I am allergic to penicillin     → User is allergic to penicillin
    I keep bees in my garden        → User keeps bees in their garden
    My daughter is called Sam       → User's daughter is called Sam

When a sentence cannot be rewritten with confidence (an unknown verb form, "we", a question)
it is quoted instead, so it still cannot be misread: `User said: "We moved to Lyon"`.
"""

from __future__ import annotations

import re

__all__ = ["third_person"]

_WORD = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)?|[^A-Za-z]+")
_FIRST_PERSON = frozenset(
    {
        "i",
        "i'm",
        "i've",
        "i'll",
        "i'd",
        "me",
        "my",
        "mine",
        "myself",
        "we",
        "we're",
        "we've",
        "we'll",
        "we'd",
        "us",
        "our",
        "ours",
        "ourselves",
    }
)
#: after "I": the third-person form (None: the verb is the same)
_AFTER_I = {
    "am": "is",
    "was": None,
    "have": "has",
    "had": None,
    "do": "does",
    "don't": "doesn't",
    "did": None,
    "didn't": None,
    "will": None,
    "won't": None,
    "would": None,
    "wouldn't": None,
    "can": None,
    "can't": None,
    "cannot": None,
    "could": None,
    "couldn't": None,
    "should": None,
    "shouldn't": None,
    "must": None,
    "might": None,
    "may": None,
    "shall": None,
    "used": None,
}
_CONTRACTED = {"i'm": "is", "i've": "has", "i'll": "will"}
_ADVERBS = frozenset(
    {
        "also",
        "always",
        "never",
        "often",
        "usually",
        "sometimes",
        "rarely",
        "seldom",
        "still",
        "just",
        "only",
        "really",
        "mostly",
        "generally",
        "already",
        "even",
        "ever",
        "hardly",
        "mainly",
        "actually",
    }
)
_IRREGULAR_PAST = frozenset(
    "ate began bought broke brought built came caught chose drank drove fell felt flew forgot "
    "found gave got grew heard held kept knew left lost made meant met paid ran sang sat saw "
    "sent slept sold spent spoke stood swam taught thought told took understood went woke "
    "won wore wrote became".split()
)
_NOT_VERBS = frozenset({"a", "an", "the", "and", "or", "but", "not", "to", "in", "on", "at"})
_OBJECT = {"me": "the user", "mine": "the user's", "myself": "themselves"}


def third_person(text: str) -> str:
    """`text` with the user's "I", "my" and "me" said of "User"; quoted when unsure.

    Text without a first-person word is returned unchanged (whitespace included).
    """
    tokens = _WORD.findall(text)
    if not any(_plain(t) in _FIRST_PERSON for t in tokens):
        return text
    rewritten = _rewrite(tokens)
    if rewritten is None:
        return f"User said: “{text.strip()}”"
    return rewritten


def _rewrite(tokens: list[str]) -> str | None:
    """The rewritten text, or None when some first-person word has no sure rewrite."""
    words = [i for i, t in enumerate(tokens) if t[0].isalpha()]
    skip: set[int] = set()
    for position, index in enumerate(words):
        if index in skip:
            continue
        token = tokens[index]
        word = _plain(token)
        start = position == 0 or _sentence_ended(tokens, words[position - 1], index)
        subject = "User" if start else "the user"
        if word in _CONTRACTED:
            tokens[index] = f"{subject} {_CONTRACTED[word]}"
        elif word == "i":
            verb_at = _verb_position(tokens, words, position)
            if verb_at is None:
                return None
            verb = _third_person_verb(tokens[words[verb_at]].lower())
            if verb is None:
                return None
            tokens[index] = subject
            tokens[words[verb_at]] = verb
            skip.add(words[verb_at])
        elif word == "my":
            tokens[index] = "User's" if start else "their"
        elif word in _OBJECT:
            tokens[index] = _OBJECT[word]
        elif word in _FIRST_PERSON:  # we, us, our, I'd (had or would?)
            return None
    return "".join(tokens)


def _plain(token: str) -> str:
    return token.lower().replace("\u2019", "'")


def _sentence_ended(tokens: list[str], previous_word: int, index: int) -> bool:
    between = "".join(tokens[previous_word + 1 : index])
    return any(mark in between for mark in ".!?;")


def _verb_position(tokens: list[str], words: list[int], position: int) -> int | None:
    """Index (in `words`) of the verb after "I", skipping adverbs like "always"."""
    at = position + 1
    while at < len(words) and tokens[words[at]].lower() in _ADVERBS:
        at += 1
    if at >= len(words):
        return None
    between = "".join(t for t in tokens[words[position] + 1 : words[at]] if not t[0].isalpha())
    if between.strip(" "):  # punctuation between "I" and its verb: not a plain clause
        return None
    return at


def _third_person_verb(verb: str) -> str | None:
    """The verb as said of "User"; None when it is not a verb form this knows."""
    verb = verb.replace("\u2019", "'")
    if verb in _AFTER_I:
        return _AFTER_I[verb] or verb
    if verb in _NOT_VERBS or verb in _FIRST_PERSON or not verb.isalpha():
        return None
    if verb.endswith("ed") or verb in _IRREGULAR_PAST:
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"
