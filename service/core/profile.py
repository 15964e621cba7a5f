"""Core memories profile (DESIGN §6.1): when to write one, from what, and how it must look.

A ≤200-word third-person summary of a user, written by the LLM from the 50 most recent
memories of the banks a chat may read, once the user has at least 5 (seeds/001).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from enum import StrEnum

from service.core import banks, safety
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
