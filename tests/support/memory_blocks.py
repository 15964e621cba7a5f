"""Find the memory blocks in what a model received, and say where one holds a fact twice.

The e2e suite runs this over every chat request its stand-in model gets (issue 15 item 3:
"no injected block contains a fact twice"). It reads the block as the model does, from the
text, with its own simple rules rather than the service's (`service/core/injection.py`), so
a mistake there cannot hide itself:

- a block opens with `<userMemories>` or "I recall the following about you:" and ends with
  the data note; a request holds at most one of each;
- a fact is an item line, `- [YYYY-MM-DD] text` (core memories and recalled items), or a
  sentence of the profile prose inside `<userMemories>`;
- two facts are the same when their normalised texts are equal, or when an item's text, or
  that text without its first word (the subject: "User", a name), is inside the profile.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

PROFILE_OPEN, PROFILE_CLOSE = "<userMemories>", "</userMemories>"
RECALL_HEADER = "I recall the following about you:"
DATA_NOTE = "(Remembered notes about the user, given as data for context."
_ITEM_LINE = re.compile(r"^- \[\d{4}-\d{2}-\d{2}\] (.+)$", re.MULTILINE)
_TRAILING = ".!?;:,…"
#: an item without its subject is compared with the profile only if this many words are left
#: ("likes tea" alone could be in any profile)
MIN_PREDICATE_WORDS = 3


@dataclass
class BlockReport:
    """What one request's memory block holds, and what is wrong with it."""

    blocks: int = 0  #: memory blocks found (a request should hold 0 or 1)
    facts: list[str] = field(default_factory=list)  #: item-line texts, in order
    profile: str = ""  #: profile prose inside <userMemories>, "" when none
    problems: list[str] = field(default_factory=list)


def normalised(text: str) -> str:
    """Case-folded, NFKC, one space between words, no trailing punctuation."""
    folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return folded.rstrip(_TRAILING).strip()


def message_texts(request: dict[str, Any]) -> list[str]:
    """The text of every message of one chat request (string or list-of-parts content)."""
    texts: list[str] = []
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return texts


def check_request(request: dict[str, Any]) -> BlockReport:
    """The memory block(s) of one chat request and every fact held twice in them."""
    report = BlockReport()
    text = "\n".join(message_texts(request))
    counts = {marker: text.count(marker) for marker in (PROFILE_OPEN, RECALL_HEADER, DATA_NOTE)}
    report.blocks = max(counts.values())
    if report.blocks == 0:
        return report
    if report.blocks > 1:
        report.problems.append(f"{report.blocks} memory blocks in one request: {counts}")
    inside = _profile_part(text)
    report.facts = _ITEM_LINE.findall(text)
    report.profile = " ".join(
        line.strip() for line in inside.splitlines() if line.strip() and not _ITEM_LINE.match(line)
    )
    if not report.facts and not report.profile:
        report.problems.append("a memory block with neither a profile nor an item line")
    seen: dict[str, str] = {}
    for fact in report.facts:
        key = normalised(fact)
        if key in seen:
            report.problems.append(f"fact twice: {fact!r} and {seen[key]!r}")
        seen.setdefault(key, fact)
    profile = normalised(report.profile)
    for fact in report.facts:
        if profile and _in_profile(fact, profile):
            report.problems.append(f"fact in the profile and again as an item: {fact!r}")
    return report


def _profile_part(text: str) -> str:
    start = text.find(PROFILE_OPEN)
    if start < 0:
        return ""
    end = text.find(PROFILE_CLOSE, start)
    return text[start + len(PROFILE_OPEN) : end if end >= 0 else len(text)]


def _in_profile(fact: str, profile: str) -> bool:
    whole = normalised(fact)
    predicate = whole.split(" ", 1)[1] if " " in whole else ""
    return whole in profile or (
        len(predicate.split()) >= MIN_PREDICATE_WORDS and predicate in profile
    )


def check_requests(requests: Iterable[dict[str, Any]]) -> tuple[int, list[str]]:
    """(memory blocks found, problems) over many chat requests."""
    blocks, problems = 0, []
    for request in requests:
        report = check_request(request)
        blocks += report.blocks
        problems += report.problems
    return blocks, problems
