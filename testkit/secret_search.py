"""Looking for a secret's value in stored rows and in what was sent to the LLM (tests only).

A value such as a PIN ("6612") or a card's check digits ("987") is found only where it stands
on its own: not inside a longer run of digits, which a stored timestamp's microseconds
(`2026-12-06T22:15:03.498712+00:00`) or an id hold by chance. A secret glued to other digits
is not the secret the user typed.
"""

from __future__ import annotations

import re


def _edges(value: str) -> tuple[str, str]:
    before = "(^|[^0-9])" if value[:1].isdigit() else ""
    after = "([^0-9]|$)" if value[-1:].isdigit() else ""
    return before, after


def holds(text: str, value: str) -> bool:
    """True when `text` holds `value`, digits at its edges not touching other digits."""
    before, after = _edges(value)
    return re.search(before + re.escape(value) + after, text) is not None


def sql_pattern(value: str) -> str:
    """A PostgreSQL regular expression (`~`) matching what `holds` matches."""
    before, after = _edges(value)
    # PostgreSQL's advanced regular expressions take the same escapes for these characters
    return before + re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", value) + after
