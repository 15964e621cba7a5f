"""What a proposed fact is to an active one, whatever op the LLM chose (pure, no LLM).

Small models give NEW for what changes an old fact, restate a known fact in other words,
aim an UPDATE at an unrelated memory and copy facts from the assistant's reply. The write
path therefore decides from the texts (and their embeddings), not from the op:

- `relation(new, old, cosine)`: SAME (a paraphrase: merge, no new row), CONTRADICTS (the same
  attribute of the same person with another value: the new fact supersedes the old) or
  SEPARATE (both stay: another person, another time, an addition).
- `on_topic(new, target, cosine)`: may an UPDATE replace `target` with `new`? An UPDATE
  about something else is written as a NEW fact instead.
- `supported(fact, user, assistant)`: does the batch's user text back the fact? A fact
  whose names or numbers only the assistant said, or with next to nothing of the user's
  words and meaning, is dropped.

The rules come first and decide most pairs: `dedup.same_fact` (numbers, dates, names and
negations tell facts apart), the subject (the words before the verb: "User" and "User's
sister" are different people), markers of an addition ("also", "auch", "aussi", …) and of
a past event with another date ("ran a marathon in 2019" / "… in 2022"), polarity
(a negation or a like/dislike verb on one side only), and single-valued attributes
(employer, home, name, age, favourite, deadline, diet, …). The embedding cosine only gates
them (`CONTRADICTION_COSINE`, `PARAPHRASE_COSINE`, `TOPIC_COSINE`, `SUPPORT_COSINE`), with
thresholds tuned on the `tune` half of tests/corpora/reconcile.json and reported on its
`report` half (docs/performance.md, "Extraction with sloppy models").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from service.core import dedup

__all__ = [
    "CONTRADICTION_COSINE",
    "PARAPHRASE_COSINE",
    "SUPPORT_COSINE",
    "TOPIC_COSINE",
    "Relation",
    "Support",
    "on_topic",
    "relation",
    "subject",
    "supported",
]

CONTRADICTION_COSINE = 0.45
"""Cosine from which two facts of the same subject with a single-valued attribute, a value
swapped in the same frame, or opposite polarity contradict (tuned on the corpus)."""
PARAPHRASE_COSINE = 0.85
"""Cosine from which two facts of the same subject that do not disagree and share most
content words are one fact (tuned on the corpus; `dedup.same_fact` decides first)."""
PARAPHRASE_OVERLAP = 0.5
"""Share of the shorter fact's content stems the other must hold for a loose paraphrase."""
TOPIC_COSINE = 0.40
"""Cosine below which an UPDATE that neither restates nor contradicts its target is about
something else (tuned on the corpus)."""
CLOSE_UPDATE_COSINE = 0.85
"""Cosine from which an UPDATE is on its target whatever `subject` reads (a record with one
value changed scores 0.93; the corpus's 30 off-target UPDATEs reach at most 0.56)."""
SUPPORT_COSINE = 0.45
"""Cosine between a fact and the user's message from which the message backs the fact even
without its words (a paraphrase, another language); ours, checked on the support corpus."""
SUPPORT_WORDS = 0.33
"""Share of a fact's content stems found in the user's messages that backs it."""


class Relation(StrEnum):
    """What a proposed fact is to an active memory."""

    SAME = "same"  #: a restatement: merge into the memory
    CONTRADICTS = "contradicts"  #: same attribute, other value: supersede the memory
    SEPARATE = "separate"  #: another fact: both stay


_TOKEN = re.compile(r"\w+(?:['\u2019]\w+)?", re.UNICODE)
_ARTICLES = frozenset("the a an der die das den dem ein eine le la les l un une el los las".split())
_USER = frozenset({"user", "user's", "users", "nutzer", "utilisateur", "usuario", "benutzer"})

_ADDITION = re.compile(
    r"\b(?:also|too|another|as well|additionally|second|besides|in addition|"
    r"auch|ebenfalls|noch|zusätzlich|aussi|également|encore|también|además|otro|otra)\b",
    re.IGNORECASE,
)
"""An addition: "User also runs marathons" is a fact beside "User runs 5 km"."""

_POSITIVE = re.compile(
    r"\b(?:likes?|loves?|enjoys?|adores?|prefers?|is a fan|fond of|favou?rite|"
    r"mag|liebt|genießt|aime|adore|adora|le gusta|le encanta|encanta|gusta)\b",
    re.IGNORECASE,
)
_NEGATIVE = re.compile(
    r"\b(?:dislikes?|hates?|detests?|loathes?|can['\u2019]?t stand|cannot stand|"
    r"is not a fan|avoids?|hasst|déteste|odia|no le gusta)\b",
    re.IGNORECASE,
)

_SINGLE_VALUED: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.IGNORECASE)
    for name, pattern in {
        "employer": r"\b(?:works? (?:at|for)|employed (?:at|by)|job at|employer|"
        r"(?:starts?|started|starting) (?:work |a job |a new job )?(?:at|with)|hired (?:at|by)|"
        r"arbeitet (?:bei|für)|travaille (?:chez|pour)|trabaja (?:en|para))\b",
        "profession": r"\b(?:works? as|is an? (?:\w+ )?(?:engineer|nurse|teacher|doctor|"
        r"developer|designer|lawyer|student|manager|driver|chef|writer|analyst|scientist|"
        r"accountant|architect|pilot|electrician|plumber|researcher|consultant|dispatcher|"
        r"barista|mechanic|pharmacist|therapist|counsell?or|journalist|farmer)|profession|"
        r"arbeitet als|travaille comme|trabaja como)\b",
        "home": r"\b(?:lives? in|moved to|based in|resides? in|home is in|wohnt in|"
        r"zog nach|habite à|vit à|vive en|se mudó a)\b",
        "name": r"\b(?:(?:is|are) (?:named|called)|name is|heißt|s['\u2019]appelle|se llama)\b",
        "age": r"\b(?:years? old|is \d+\b|turned \d+|age is|jahre alt|ans\b|años)\b",
        "favourite": r"\b(?:favou?rite|prefers?|preferred|lieblings\w*|préféré\w*|"
        r"preferid\w*|bevorzugt|préfère|prefiere)\b",
        "deadline": r"\b(?:deadline|due (?:on|by|date)|is due|frist|échéance|fecha límite|"
        r"appointment is|meeting is|flight is|wedding is|exam is)\b",
        "diet": r"\b(?:vegetarian|vegan|eats? meat|pescatarian|vegetarisch|végétarien|"
        r"vegetariano)\b",
        "status": r"\b(?:married|single|divorced|engaged|verheiratet|marié|casad[oa])\b",
        "count": r"\b(?:has \d+|has (?:one|two|three|four|five|six) (?:children|kids|cats|dogs)|"
        r"budget|salary|costs?|price|weighs?|height|rent)\b",
        "uses": r"\b(?:uses|runs on|is written in|is built with|database is|"
        r"language is|stack is)\b",
    }.items()
}
"""Attributes one person has one value of at a time (a new employer replaces the old one).
English, German, French and Spanish forms; ours."""

_MULTI_VALUED = frozenset(
    "has have owns own plays play speaks speak likes like loves love enjoys enjoy visited "
    "collects reads watches knows met hat spielt spricht a joue parle tiene juega habla".split()
)
"""Verbs of which a person holds many values at once ("has a dog" and "has a cat")."""

_PAST = re.compile(r"\b\w+ed\b|\b(?:ran|went|saw|met|won|flew|swam|gave|took|wrote|ate)\b")


def _tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFC", text).casefold().replace("\u2019", "'")
    words = (_ELISION.sub("", w) for w in _TOKEN.findall(text))
    return [w for w in words if w and w not in _ARTICLES]


_ELISION = re.compile(r"^(?:l|d|j|qu|n|s|c)'(?=\w)")
"""French elided articles and pronouns ("l'utilisateur" is "utilisateur")."""


def _stem(word: str) -> str:
    """A crude stem: the first five letters (works/worked/working; arbeitet/arbeiten)."""
    return word[:5]


_STOP = frozenset(
    "user user's users is are was were be been has have had do does did to of in on at for "
    "with and or but their they them his her its it that this as by from not no very now "
    "still just ist sind und oder mit von zu im am est sont et ou avec de du des en es son "
    "y o con por para del while when each every some really currently actually much so "
    "up".split()
)


def _content_stems(text: str) -> set[str]:
    return {_stem(w) for w in _tokens(text) if w not in _STOP and (len(w) > 1 or w.isdigit())}


def subject(text: str) -> tuple[str, ...]:
    """Who a fact is about: ("user",) or ("user's", "sister", …) up to the first verb-like
    word; a fact about a named person starts with the name.
    """
    tokens = _tokens(text)
    if not tokens:
        return ()
    if tokens[0] in _USER and tokens[0] != "user's":
        return ("user",)
    head = [tokens[0]]
    for word in tokens[1:4]:
        if word in _STOP or word in _MULTI_VALUED or _PAST.fullmatch(word):
            break
        if word.endswith("s") and not word.endswith("'s") and len(head) >= 2:
            break  # "User's sister works": the verb
        head.append(word)
    return tuple(head)


def _same_subject(a: str, b: str) -> bool:
    sa, sb = subject(a), subject(b)
    if sa == sb:
        return True
    # "User's sister" and "User's sister Jane" are the same person
    shorter, longer = sorted((sa, sb), key=len)
    return len(shorter) >= 2 and longer[: len(shorter)] == shorter


_QUOTED = re.compile(r"^\s*user said\b", re.IGNORECASE)
"""The form `core.person` gives a first-person text it cannot rewrite: `User said: "…"`."""


def _polarity(text: str) -> int:
    negated = dedup.has_negation(text)
    if _NEGATIVE.search(text):
        return -1
    if _POSITIVE.search(text):
        return -1 if negated else 1
    return -1 if negated else 0


def _attributes(text: str) -> set[str]:
    return {name for name, pattern in _SINGLE_VALUED.items() if pattern.search(text)}


def _swapped_value(new: str, old: str) -> bool:
    """True when the two facts share a frame — subject and predicate before the differing
    words — and differ only in a short value ("works at Falcon" / "works at Heron").
    """
    a, b = _tokens(new), _tokens(old)
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(a), len(b)) - prefix and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]
    ):
        suffix += 1
    middle_a, middle_b = a[prefix : len(a) - suffix], b[prefix : len(b) - suffix]
    if not middle_a or not middle_b or len(middle_a) > 4 or len(middle_b) > 4:
        return False
    kinds_a, kinds_b = _attributes(new), _attributes(old)
    if kinds_a and kinds_b and not kinds_a & kinds_b:
        return False  # "is called Rex" / "is 4 years old": two attributes, not two values
    frame = a[:prefix]
    if len(frame) <= len(subject(new)):
        return False  # only the subject is shared: another predicate
    predicate = [w for w in frame[len(subject(new)) :] if w not in _COPULAS]
    if not predicate:
        # only the subject and "is" are shared: another predicate ("is a nurse" / "is
        # interested in pottery"), unless the values are names, numbers or dates
        named = dedup.distinguishing_words(new) ^ dedup.distinguishing_words(old)
        if not (set(middle_a) & named and set(middle_b) & named):
            return False
    # "has a dog" / "has a cat", "adopted a cat" / "adopted a dog": values that add up
    return not any(w in _MULTI_VALUED or _PAST.fullmatch(w) for w in frame)


_COPULAS = frozenset(
    "is are was were be being been ist sind war est sont était es son está".split()
)


_COMPARATIVE = re.compile(r"\b(?:over|than|rather|instead|statt|plutôt|que)\b", re.IGNORECASE)


def _swapped_order(new: str, old: str) -> bool:
    """The same words in another order around a comparison ("tea over coffee" / "coffee
    over tea"): the preference turned round.
    """
    a, b = _tokens(new), _tokens(old)
    return a != b and sorted(a) == sorted(b) and bool(_COMPARATIVE.search(new))


def _other_value(new: str, old: str) -> bool:
    """Both facts have content words the other lacks in the same frame ("owns a road bike" /
    "owns a mountain bike"): another thing, not other words for the same one.
    """
    only_new = _content_stems(new) - _content_stems(old)
    only_old = _content_stems(old) - _content_stems(new)
    if not only_new or not only_old:
        return False
    a, b = _tokens(new), _tokens(old)
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    return prefix > len(subject(new))


def _predicate_overlap(new: str, old: str) -> float:
    """Share of the shorter fact's predicate stems the other holds (the subject's words are
    shared by construction and left out).
    """
    who = {_stem(w) for w in subject(new) + subject(old)}
    predicate_new, predicate_old = _content_stems(new) - who, _content_stems(old) - who
    smaller = min(len(predicate_new), len(predicate_old))
    return len(predicate_new & predicate_old) / smaller if smaller else 0.0


def _other_value_of(new: str, old: str, cosine: float) -> bool:
    """Could `new` give the attribute another value? Each fact must hold content the other
    lacks (a fact that only adds a word refines the old one), and facts naming the same
    names, numbers and dates give the same value in other words ("works at Falcon" /
    "is employed at Falcon", at a rewording's cosine).
    """
    if not (_content_stems(new) - _content_stems(old)) or not (
        _content_stems(old) - _content_stems(new)
    ):
        return False
    named_new, named_old = dedup.distinguishing_words(new), dedup.distinguishing_words(old)
    return not (named_new and named_new == named_old and cosine >= dedup.REWORD_COSINE)


def _both_negative(new: str, old: str) -> bool:
    """Both facts say the same dislike, one with a negation ("dislikes long meetings" /
    "does not like long meetings"), and disagree in nothing else.
    """
    if _polarity(new) != -1 or _polarity(old) != -1:
        return False
    differing = set(_tokens(new)) ^ set(_tokens(old))
    named = dedup.distinguishing_words(new) | dedup.distinguishing_words(old)
    return not any(w in named for w in differing)


def _dated_event(new: str, old: str) -> bool:
    """Two past events told apart by their date ("visited Rome in 2019" / "… in 2022")."""
    differing = set(_tokens(new)) ^ set(_tokens(old))
    dated = bool(differing) and all(
        w in dedup.distinguishing_words(new) | dedup.distinguishing_words(old)
        and (any(c.isdigit() for c in w) or w in _MONTHS_AND_DAYS)
        for w in differing
    )
    return dated and bool(_PAST.search(new.casefold()) and _PAST.search(old.casefold()))


_MONTHS_AND_DAYS = dedup._DATE_WORDS


def relation(
    new: str,
    old: str,
    cosine: float,
    *,
    text_threshold: float = 0.95,
    cosine_threshold: float = 0.97,
    contradiction_cosine: float = CONTRADICTION_COSINE,
    paraphrase_cosine: float = PARAPHRASE_COSINE,
) -> Relation:
    """What the proposed fact `new` is to the active memory `old`.

    Args:
        new, old: the two facts (third-person sentences).
        cosine: their embeddings' cosine similarity, in [-1, 1].
        text_threshold, cosine_threshold: `dedup.same_fact`'s (MEMORY_DEDUP_*).
        contradiction_cosine, paraphrase_cosine: this module's gates (defaults tuned).
    """
    if _swapped_order(new, old):
        return Relation.CONTRADICTS
    if dedup.same_fact(
        new, old, cosine, text_threshold=text_threshold, cosine_threshold=cosine_threshold
    ):
        return Relation.SAME
    if _QUOTED.match(new) or _QUOTED.match(old):
        return Relation.SEPARATE  # a quote has no attribute to change: only dedup merges it
    if not _same_subject(new, old) or _ADDITION.search(new):
        return Relation.SEPARATE
    if _dated_event(new, old):
        return Relation.SEPARATE
    if cosine >= contradiction_cosine:
        pa, pb = _polarity(new), _polarity(old)
        if pa * pb < 0 or (pa != pb and dedup.has_negation(new) != dedup.has_negation(old)):
            # the same thing liked and disliked, done and not done: most of the predicate
            # shared ("eats meat" / "does not eat meat"), not one word of two stories
            if _predicate_overlap(new, old) >= PARAPHRASE_OVERLAP:
                return Relation.CONTRADICTS
        if _other_value_of(new, old, cosine) and (
            _attributes(new) & _attributes(old) or _swapped_value(new, old)
        ):
            return Relation.CONTRADICTS
    if (
        cosine >= paraphrase_cosine
        and (not dedup.disagree(new, old) or _both_negative(new, old))
        and _attributes(new) == _attributes(old)
        and not _other_value(new, old)
        and _predicate_overlap(new, old) >= PARAPHRASE_OVERLAP
    ):
        return Relation.SAME
    return Relation.SEPARATE


def on_topic(new: str, target: str, cosine: float, *, topic_cosine: float = TOPIC_COSINE) -> bool:
    """May an UPDATE replace `target` with `new`? Yes when `new` restates or contradicts
    it, or is about the same subject at a cosine ≥ `topic_cosine`; otherwise the UPDATE is
    about something else and `new` is written as a NEW fact.
    """
    if relation(new, target, cosine) is not Relation.SEPARATE:
        return True
    if cosine >= CLOSE_UPDATE_COSINE:
        # the same record with a value changed ("Team meeting: room 4A, 10:00" → "room 5B"):
        # no verb, so `subject` reads the values as the subject, but the meaning is one
        return True
    return _same_subject(new, target) and cosine >= topic_cosine and not _ADDITION.search(new)


@dataclass(frozen=True, slots=True)
class Support:
    """Whether the user's own messages back a fact, and why not."""

    backed: bool
    reason: str = ""  #: "from_assistant" or "unsupported" when not backed


def _loose_words(text: str) -> set[str]:
    return {_stem(w) for w in _tokens(text)}


def supported(
    fact: str,
    user_texts: Sequence[str],
    assistant_texts: Sequence[str],
    *,
    user_cosine: float,
    assistant_cosine: float,
    user_name: str | None = None,
    support_cosine: float = SUPPORT_COSINE,
) -> Support:
    """Do the batch's user messages back `fact`?

    The names and numbers of the fact (`dedup.distinguishing_words`, dates left out: the
    model writes "tomorrow" as a date) must be in the user's text; one only the assistant
    said makes the fact the assistant's. Otherwise the fact needs `SUPPORT_WORDS` of its
    content stems in the user's text, or a cosine ≥ `support_cosine` to the user's messages
    that is not below its cosine to the assistant's replies.

    Args:
        fact: the proposed fact.
        user_texts, assistant_texts: the batch's user messages and the replies to them.
        user_cosine, assistant_cosine: the fact's best cosine to a user message and to an
            assistant reply (0 when there is none).
        user_name: the sender's display name; a fact may name the user without the user
            having written their own name ("Melanie has two kids" from "my kids").
    """
    user_words = set().union(*(_loose_words(t) for t in user_texts)) if user_texts else set()
    assistant_words = (
        set().union(*(_loose_words(t) for t in assistant_texts)) if assistant_texts else set()
    )
    names = {
        _stem(w)
        for w in dedup.distinguishing_words(fact)
        if w not in _MONTHS_AND_DAYS
        and not re.fullmatch(r"\d{4}(?:-\d\d){0,2}|\d\d?", w)
        and w not in _USER
    }
    own = _loose_words(user_name) if user_name else set()
    missing = names - user_words - own
    if missing:
        if missing & assistant_words:
            return Support(False, "from_assistant")
        if names and len(missing) == len(names):
            return Support(False, "unsupported")
    stems = _content_stems(fact) - own
    if stems:
        found = len(stems & user_words) / len(stems)
        if found >= SUPPORT_WORDS:
            return Support(True)
        from_assistant = len(stems & assistant_words) / len(stems)
        if from_assistant > found and assistant_cosine > user_cosine:
            return Support(False, "from_assistant")
    if user_cosine >= support_cosine and user_cosine >= assistant_cosine:
        return Support(True)
    return Support(False, "unsupported")
