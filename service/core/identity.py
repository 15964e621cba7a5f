"""Whose fact is it: checks of an extracted fact against who the user is (DESIGN §5).

The extraction prompt says that facts about other people belong to them and that names the
user only mentions are not the user's name; these checks refuse the two mistakes an LLM
still makes:

- an identity fact about the user's own name ("User's name is Jane Ortiz", "El usuario se
  llama Jane") that shares no word with the name Open WebUI gives for the sender — that
  name is the account's, so a different one is someone the user talked about;
- a fact written about the user ("User can't stand cilantro") whose words, in the message
  it comes from, only appear in sentences about somebody else ("my brother can't stand
  cilantro") with no "I"/"me"/"we" in them (English messages).
"""

from __future__ import annotations

import re
import unicodedata

# "User's name is X", "The user is called X", and the same in es, fr, de, it, pt, nl
_OWN_NAME = re.compile(
    r"^\s*(?:"
    r"(?:the )?user(?:'s|\u2019s)? (?:full |first |last |real |given |sur)?name is"
    r"|(?:the )?user(?:'s|\u2019s)? name:"
    r"|(?:the )?user is (?:called|named)"
    r"|(?:el|su) nombre(?: completo)? del usuario es|el usuario se llama"
    r"|le nom de l['\u2019]utilisateur est|l['\u2019]utilisateur s['\u2019]appelle"
    r"|der name des (?:nutzers|benutzers|users) ist|der (?:nutzer|benutzer|user) hei(?:ss|ß)t"
    r"|il nome dell['\u2019]utente [eè]|l['\u2019]utente si chiama"
    r"|o nome do usu[aá]rio [eé]|o usu[aá]rio se chama"
    r"|de naam van de gebruiker is|de gebruiker heet"
    r")\s+(?P<name>[^.,;:!?()\n]+)",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_]+")


def _words(text: str) -> set[str]:
    folded = unicodedata.normalize("NFKD", text.casefold())
    bare = "".join(c for c in folded if not unicodedata.combining(c))
    return {w for w in _WORD.findall(bare) if len(w) > 1}


def contradicts_user_name(fact: str, user_name: str | None) -> bool:
    """True when `fact` gives the user a name that shares no word with `user_name`.

    A word of one that begins the other counts as shared ("Alex" and "Alexander"). Without
    a display name (or one with no letters, such as an id) nothing is contradicted.
    """
    found = _OWN_NAME.match(fact)
    known = _words(user_name or "")
    if found is None or not known:
        return False
    claimed = _words(found.group("name"))
    if not claimed:
        return False
    return not any(a.startswith(b) or b.startswith(a) for a in claimed for b in known)


_ABOUT_USER = re.compile(r"^\s*(?:the )?user\s+(?!'s|\u2019s)", re.IGNORECASE)
_RELATIONS = (
    r"brother|sister|mother|mom|mum|father|dad|wife|husband|partner|girlfriend|boyfriend|"
    r"son|daughter|kids?|children|friend|boss|colleague|coworker|co-worker|neighbou?r|"
    r"roommate|flatmate|cousin|aunt|uncle|niece|nephew|grandmother|grandfather|grandma|"
    r"grandpa|fianc[eé]e?|client|customer|manager|team"
)
_RELATION = re.compile(rf"\b(?:{_RELATIONS})s?\b", re.IGNORECASE)
_OTHER_PERSON = re.compile(
    rf"\b(?:my|our)\s+(?:\w+\s+)?(?:{_RELATIONS})s?\b|\b(?:he|she|they)\b", re.IGNORECASE
)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|myself|we|we're|us)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?\n]+")
_COMMON = frozenset(
    """user users about their there they them this that with from have has had does doesn
    really very much likes like loves love hates hate wants want never always would could
    should just also still been being into onto over under than then when what which
    who whom whose will shall""".split()
)


def misattributed(fact: str, message: str) -> bool:
    """True when `fact` is about the user but `message` says it of someone else.

    Only facts starting "User …" (not "User's …") that name no relation ("sister",
    "boss", …) are checked. The fact's content words
    (4+ letters, not common) are looked up in the message's sentences; the fact is
    misattributed when at least one sentence holds one of them and every such sentence
    names another person ("my brother", "she") and no first person ("I", "me", "we").
    """
    if not _ABOUT_USER.match(fact) or _RELATION.search(fact):
        return False  # "User has a sister named Jane" is the user's fact about a relation
    terms = {w for w in _words(fact) if len(w) >= 4 and w not in _COMMON}
    if not terms:
        return False
    holding = [s for s in _SENTENCE.findall(message) if terms & _words(s)]
    if not holding:
        return False
    return all(_OTHER_PERSON.search(s) and not _FIRST_PERSON.search(s) for s in holding)


def refusal(fact: str, *, user_name: str | None, message: str) -> str | None:
    """Why an extracted fact is not stored as the user's, or None when it may be."""
    if contradicts_user_name(fact, user_name):
        return "gives the user a name other than their account's"
    if misattributed(fact, message):
        return "the message says it of someone else"
    return None
