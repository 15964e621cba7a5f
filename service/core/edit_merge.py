"""Two manual edits of one memory made at the same moment: the second applied on top of the
first (issue 27, item 6).

Both editors started from the same text (`base`). The one whose write comes second finds the
memory changed (`theirs`); its own edit (`ours`) is then merged word by word: each edit is a
list of replaced spans of `base`, and when no span of one overlaps (or inserts at the edge
of) a span of the other, both are applied. When they touch the same words there is no
answer that keeps both, so `merge` returns None and the caller tells the user what the
memory reads now.

A word is a run of non-space characters; the spaces between words belong to the span too,
so a merged text keeps each editor's spacing. Pure (difflib of the standard library).
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

__all__ = ["merge"]

_TOKEN = re.compile(r"\s+|\S+")

Change = tuple[int, int, list[str]]
"""(first base token replaced, one past the last, the tokens put there)."""


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _changes(base: list[str], edited: list[str]) -> list[Change]:
    matcher = SequenceMatcher(a=base, b=edited, autojunk=False)
    return [
        (i1, i2, edited[j1:j2]) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"
    ]


def _clash(a: Change, b: Change) -> bool:
    """True when two changes touch the same base tokens, or insert at the same place."""
    a1, a2, _ = a
    b1, b2, _ = b
    if a1 == a2 or b1 == b2:  # an insertion: clashes with anything at or around its point
        return a1 <= b2 and b1 <= a2
    return a1 < b2 and b1 < a2


def merge(base: str, ours: str, theirs: str) -> str | None:
    """`base` with the changes of both `ours` and `theirs`, or None when they clash.

    Args:
        base: the text both editors started from.
        ours: the edit that comes second (not written yet).
        theirs: what the memory reads now (the edit written first).

    Returns:
        The merged text (`ours` when `theirs` did not change the text, `theirs` when both
        made the same change), or None when the two edits change the same words differently.
    """
    if theirs == base or theirs == ours:
        return ours
    if ours == base:
        return theirs
    tokens = _tokens(base)
    mine = _changes(tokens, _tokens(ours))
    other = _changes(tokens, _tokens(theirs))
    if any(_clash(a, b) for a in mine for b in other):
        return None
    out: list[str] = []
    at = 0
    for start, end, put in sorted(mine + other, key=lambda c: (c[0], c[1])):
        out.extend(tokens[at:start])
        out.extend(put)
        at = end
    out.extend(tokens[at:])
    return "".join(out)
