"""First-person memories written by the user, turned to the third person (pure).

A memory is injected under "I recall the following about you:", where "I" is the assistant;
`/memory add I am allergic to penicillin` stored as typed would read as the assistant's own
allergy. Memories the extractor writes already say "User …"; this makes typed ones say so too:

    I am allergic to penicillin     → User is allergic to penicillin
    I keep bees in my garden        → User keeps bees in their garden
    My daughter is called Sam       → User's daughter is called Sam

When a sentence cannot be rewritten with confidence (an unknown verb form, "we", a question)
it is quoted instead, so it still cannot be misread: `User said: "We moved to Lyon"`.

Only English is rewritten, and only whole words: a word is a run of Unicode letters (so
"système" or "Tôi" is one word, never "syst" + "me"), and a text with a first-person-looking
word is rewritten only when it reads as English (`_reads_as_english`): Latin letters only,
and no function word of another language unless more English ones ("Me gusta el café",
"Mam psa i kota" are left as typed). Rewriting is idempotent: a text already quoted as the user's is
never quoted again (an import preview's text is guarded again on confirmation).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["third_person"]

# a word: Unicode letters, with one inner apostrophe ("I'm", "Türkiye'de"); anything else
# (digits, spaces, marks of punctuation) is kept between words as it is
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?|[\W\d_]+")
_QUOTE_PREFIX = "User said: \u201c"
_QUOTE_SUFFIX = "\u201d"
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
#: English words that other languages written in Latin letters do not use as common words
#: (so not "me", "my", "i", "a", "in", "to", "is", "was", "will", "so", "die": Spanish,
#: Polish, Dutch, German words too); ours, from English function-word lists
_ENGLISH = frozenset(
    "the and of for from with at on this that these those it its be been being am are were "
    "have has had do does did don't doesn't didn't not no would can can't could should "
    "must might may shall just very always never often usually sometimes because when what "
    "who which where why how they their them you your he she his her him our we us mine "
    "myself about into over after before all some any more most other than then there here "
    "like love live lives work keep prefer know want need think go get got make call tell "
    "remind name born moved married allergic favourite favorite daughter son wife husband "
    "brother sister mother father friend dog cat house home job year years every".split()
)
#: common function words of other languages written in Latin letters (French, Spanish,
#: Portuguese, Italian, German, Dutch, Polish, Czech, Turkish, Vietnamese, Romanian,
#: Swedish, Danish, Norwegian, Indonesian), minus English words; ours
_OTHER_LANGUAGES = (
    frozenset(
        (
            "je j'ai suis est les le la des du une et mon ma mes moi nous vous avec pour dans "
            "sur pas très c'est qui que aussi mais où ai au aux sont ont "
            "yo soy estoy tengo el los las una y es muy mi mis con para por del gusta pero "
            "también está hay llamo "
            "eu sou estou tenho não um uma meu minha em do da dos das os é muito mas gosto "
            "io sono ho il lo gli della di che non mio mia per anche molto piace chiamo "
            "ich bin habe und der das ist nicht mit ein eine mein meine meinen mich mir zu "
            "auf auch sehr aber wir sind "
            "ik ben het een mijn niet van en ook heb wij zijn maar met "
            "jestem mam nie się jest w z na mój moja moje mnie ale że też bardzo mamy "
            "jsem mám je se ne můj "
            "ben bir ve bu çok için benim değil var yok ile "
            "tôi là của và không có một được người những cho với này em anh chị "
            "sunt și nu cu pe în mea "
            "jag är och min mitt inte det har jeg er og ikke "
            "saya aku dan yang tidak ini itu ada"
        ).split()
    )
    - _ENGLISH
)


def third_person(text: str) -> str:
    """`text` with the user's "I", "my" and "me" said of "User"; quoted when unsure.

    Text without a first-person word is returned unchanged (whitespace included).
    """
    stripped = text.strip()
    if stripped.startswith(_QUOTE_PREFIX) and stripped.endswith(_QUOTE_SUFFIX):
        return text  # already the user's quoted words
    tokens = _WORD.findall(text)
    if not any(_plain(t) in _FIRST_PERSON for t in tokens):
        return text
    if not _reads_as_english([t for t in tokens if t[0].isalpha()]):
        return text  # another language's "me", "i", "my": not an English pronoun
    rewritten = _rewrite(tokens)
    if rewritten is None:
        return f"{_QUOTE_PREFIX}{stripped}{_QUOTE_SUFFIX}"
    return rewritten


def _reads_as_english(words: list[str]) -> bool:
    """True when the words are all in Latin letters and none of them is a function word of
    another language (`_OTHER_LANGUAGES`), or more are English ones (`_ENGLISH`, the capital
    pronoun "I" and its contractions) than those: "I love the Café de Flore" is English,
    "Me gusta el café" is not.
    """
    if any(_outside_latin(w) for w in words):
        return False
    english = other = 0
    for word in words:
        plain = _plain(word)
        if word == "I" or plain in _CONTRACTED or plain in _ENGLISH:
            english += 1
        elif plain in _OTHER_LANGUAGES:
            other += 1
    return other == 0 or english > other


def _outside_latin(word: str) -> bool:
    return any(ch.isalpha() and not unicodedata.name(ch, "").startswith("LATIN") for ch in word)


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
