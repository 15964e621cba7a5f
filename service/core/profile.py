"""Core memories profile (DESIGN §6.1): when to write one, from what, and how it must look.

A ≤200-word third-person summary of a user, written by the LLM from the 50 most recent
memories of the banks a chat may read, once the user has at least 5 (seeds/001).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from enum import StrEnum

from service.core import banks, dedup, safety
from service.core.records import Memory, ReadScope, Scope

MIN_MEMORIES = 5
SOURCE_MEMORIES = 50
MAX_WORDS = 200


class ProfileView(StrEnum):
    """Which banks a profile is written from, by the kind of chat that will read it."""

    PRIVATE = "private"  #: Personal + Interaction Patterns (private chats)
    SHARED = "shared"  #: Interaction Patterns only (collaborative chats)


def view_for(*, collaborative: bool) -> ProfileView:
    """The profile a chat may see."""
    return ProfileView.SHARED if collaborative else ProfileView.PRIVATE


def view_scope(user_id: str, view: ProfileView) -> ReadScope:
    """The cells a profile view is written from (never Project Memory: it is shared work)."""
    return ReadScope(
        tuple(
            Scope(r.owner_kind, user_id, r.bank)
            for r in banks.rows()
            if r.in_profile and (view is ProfileView.PRIVATE or not r.private)
        )
    )


def fingerprint(memories: Sequence[Memory]) -> int:
    """A signed 63-bit number that changes whenever any source memory or its version does."""
    text = ",".join(f"{m.seq}:{m.version}" for m in sorted(memories, key=lambda m: m.seq))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


PROMPT = f"""Write a short profile of a person from the notes below, for an assistant that
will talk with them. Rules: third person; at most {MAX_WORDS} words; plain prose, no lists or
headings; only facts stated in the notes — never guess, add or embellish; keep their own
language for names and terms; leave out anything that looks like a password, key or code.
Answer with the profile text only."""


def build_messages(*, user_name: str | None, memories: Sequence[Memory]) -> list[dict[str, str]]:
    """Chat messages asking the LLM for the profile."""
    notes = "\n".join(f"- ({m.created_at:%Y-%m-%d}) {m.content}" for m in memories)
    who = f"The person is called {user_name}.\n" if user_name else ""
    return [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": f"{who}Notes:\n{notes}"},
    ]


_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)


def clean_profile(text: str) -> str:
    """The LLM's answer without reasoning blocks or fences, cut to MAX_WORDS words."""
    text = _THINK.sub("", text).strip().strip("`").strip()
    words = text.split()
    if len(words) > MAX_WORDS:
        text = " ".join(words[:MAX_WORDS]).rstrip(",;:") + "…"
    return text


def checked_profile(text: str) -> str | None:
    """A profile text fit to inject, or None.

    The same guards as every memory (DESIGN §5.5): secrets are replaced by placeholders,
    and a text that reads as an instruction to the assistant is refused whole — a profile
    is one paragraph, so there is no fact to keep once part of it gives orders. Used when
    a profile is written and again when it is read (a row may predate the rules).
    """
    text = safety.redact_secrets(text).strip()
    if not text or safety.looks_like_instruction(text):
        return None
    return text


# A clause ends at a sentence end, a semicolon or a line break; a "Label: value" record
# ("Name: Sarah Age: 35") is one clause per label, even on one line. A label is up to three
# words, the later ones lower-case: "Age:", "Favourite food:", but not "Sarah Age:".
_LABEL_WORDS = r"[^\W\d_]\w*(?: [^\W\d_A-Z]\w*){0,2}:"
_CLAUSE_END = re.compile(rf"(?<=[.!?;])\s+|\n+|\s+(?={_LABEL_WORDS}\s)")
_LABEL = re.compile(rf"^\s*{_LABEL_WORDS}\s*")
#: a name in the profile matches a word of the notes when one is a prefix of the other and
#: the shorter has at least this many letters ("dog" / "dogs", "Portland" / "Portland's")
_PREFIX_MIN = 3


def _known(word: str, vocabulary: set[str]) -> bool:
    if word in vocabulary:
        return True
    if len(word) < _PREFIX_MIN or any(ch.isdigit() for ch in word):
        return False
    return any(
        len(known) >= _PREFIX_MIN and (known.startswith(word) or word.startswith(known))
        for known in vocabulary
    )


def _invented(clause: str, vocabulary: set[str]) -> set[str]:
    """The names and numbers of `clause` that no note (nor the user's name) holds.

    A label ("Age:") is not checked, its value is — and the value's first word counts as
    a name when capitalized ("Name: Sarah"), which `dedup.distinguishing_words` skips as a
    sentence start.
    """
    value = _LABEL.sub("", clause, count=1)
    checked = dedup.distinguishing_words(value)
    if value != clause:
        first = value.split(maxsplit=1)[:1]
        if first and first[0][:1].isupper():
            checked |= dedup.words(first[0])
    return {word for word in checked if not _known(word, vocabulary)}


def grounded_profile(
    text: str, *, memories: Sequence[Memory], user_name: str | None = None
) -> str | None:
    """`text` without the clauses that name a person, place, number or date no note holds.

    Small models fill a profile with a made-up name, age or job ("Name: Sarah Age: 35" for
    a user called Audrey whose notes give neither, measured with Qwen2.5-1.5B in `make h2h`).
    The prompt forbids it; this enforces it. A clause is a sentence, a `;`-part, a line or
    one "Label: value" record; its distinguishing words (`dedup.distinguishing_words`:
    numbers, dates, capitalized words) must each be in a note, the notes' dates or the
    user's name. The text is returned unchanged when every clause passes.

    Returns:
        The kept clauses, or None when none is left.
    """
    vocabulary: set[str] = set()
    for memory in memories:
        vocabulary |= dedup.words(memory.content) | dedup.words(f"{memory.created_at:%Y-%m-%d}")
    if user_name:
        vocabulary |= dedup.words(user_name)
    clauses = [c for c in _CLAUSE_END.split(text) if c.strip()]
    kept = [c.strip().rstrip(";,") for c in clauses if not _invented(c, vocabulary)]
    if len(kept) == len(clauses):
        return text.strip() or None
    return " ".join(c if c[-1:] in ".!?…" else c + "." for c in kept) or None
