"""The summary contract with the LLM: the prompt that asks for one merged memory, and the
validation of its answer into a `SummaryDraft` (faithful: every source covered, no name or
number lost, never an instruction).
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from service.core import safety
from service.core.consolidation.clustering import Cluster
from service.core.records import Bank, Memory
from service.errors import SummaryOutputInvalid

__all__ = [
    "REPAIR_PROMPT",
    "SUMMARY_SYSTEM_PROMPT",
    "SummaryDraft",
    "build_summary_messages",
    "key_terms",
    "parse_summary",
    "source_refs",
]


@dataclass(frozen=True, slots=True)
class SummaryDraft:
    """A validated summary, ready to be stored in place of its cluster."""

    content: str  #: the merged text (NFC), at most `summary_max_chars`
    bank: Bank  #: the sources' bank (never the LLM's choice)
    tags: tuple[str, ...]  #: every tag of the sources
    confidence: float  #: the lowest confidence of the sources
    first_stated_at: datetime  #: when the oldest source was stated
    last_stated_at: datetime  #: when the newest source was stated; the summary's own date
    source_ids: tuple[uuid.UUID, ...]  #: the merged memories, oldest first


# --- the summary contract with the LLM ------------------------------------------------------


SUMMARY_SYSTEM_PROMPT = """You merge several memories that a chat assistant keeps about one \
user (or about one shared project) into ONE memory that replaces them.
Rules:
- Keep every fact of every source memory: every name, number, place, preference and date.
  Leave nothing out. Only what several sources say alike may be said once.
- Add nothing that is not in the sources; do not guess, judge or generalize.
- When the sources were stated on different dates and the time matters for a fact, keep its
  date next to it as an absolute date.
- Write in the language of the sources, in the same voice (e.g. "User …"), as one compact
  text; separate facts with semicolons.
- At most {max_chars} characters.
Answer with ONE JSON object and nothing else:
{{"content": "the merged memory", "covers": ["s1", "s2", "..."]}}
"covers" lists the ref of every source memory whose facts your content keeps."""

REPAIR_PROMPT = (
    "Your previous answer was not valid: {reason}. Answer again with only the JSON object "
    '{{"content": "...", "covers": [...]}}, keeping every fact of every source memory.'
)


def source_refs(cluster: Cluster) -> dict[str, Memory]:
    """Short refs the prompt shows for the sources: s1, s2, … in time order."""
    return {f"s{i + 1}": m for i, m in enumerate(cluster.members)}


def build_summary_messages(cluster: Cluster, *, max_chars: int) -> list[dict[str, str]]:
    """Chat messages asking the LLM to merge `cluster` into one memory.

    The sources appear one per line inside `<source_memories>` as
    `[s1] (YYYY-MM-DD) text`, oldest first.
    """
    lines = "\n".join(
        f"[{ref}] ({m.created_at:%Y-%m-%d}) {m.content}" for ref, m in source_refs(cluster).items()
    )
    kind = "near-duplicates of one fact" if cluster.duplicates else "related memories"
    user = (
        f"Bank: {cluster.bank.label}\n"
        f"These {len(cluster.members)} source memories are {kind}.\n\n"
        f"SOURCE MEMORIES (ref, date stated, text):\n"
        f"<source_memories>\n{lines}\n</source_memories>"
    )
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT.format(max_chars=max_chars)},
        {"role": "user", "content": user},
    ]


# Straight and typographic apostrophes both join a possessive to its word.
_WORD = re.compile(r"[^\W_][\w'’.:/-]*", re.UNICODE)  # noqa: RUF001
_TRAILING = re.compile(r"(['’]s|[.:/'’-])+$", re.IGNORECASE)  # noqa: RUF001
_PLAIN_WORDS = frozenset({"user", "user's", "i", "the", "a", "an"})


def key_terms(text: str) -> set[str]:
    """Words of `text` a faithful merge must keep: numbers and capitalized words that do not
    open a sentence (names, places, brands), case-folded, without a possessive "'s".

    A heuristic, not a proof: it catches a summary that drops a name, a number or a date.
    """
    terms: set[str] = set()
    opens_sentence = True
    for match in _WORD.finditer(text):
        word = match.group(0)
        core = _TRAILING.sub("", word)
        if (
            core
            and core.casefold() not in _PLAIN_WORDS
            and (any(ch.isdigit() for ch in core) or (core[0].isupper() and not opens_sentence))
        ):
            terms.add(core.casefold())
        following = text[match.end() : match.end() + 1]
        opens_sentence = following in ("!", "?") or (
            word.endswith(".") and not _is_abbreviation(word)
        )
    return terms


def _is_abbreviation(word: str) -> bool:
    return word.rstrip(".") in {"Dr", "Mr", "Mrs", "Ms", "St", "Prof", "e.g", "i.e", "vs"}


def parse_summary(data: Any, *, cluster: Cluster, max_chars: int) -> SummaryDraft:
    """Validate the LLM's decoded answer into a summary of `cluster`.

    The bank, tags, dates and confidence come from the sources, never from the answer: the
    summary keeps the sources' bank (case 19: summaries must not reset banks or tags).

    Args:
        data: the decoded JSON answer: `{"content": str, "covers": [refs]}`.
        cluster: the sources.
        max_chars: the longest allowed text (chars).

    Raises:
        SummaryOutputInvalid: no text, too long, instruction-like, a source left out of
            `covers`, or a name or number of a source missing from the text.
    """
    if not isinstance(data, Mapping):
        raise SummaryOutputInvalid("the answer is not a JSON object")
    raw = data.get("content", data.get("summary", data.get("memory")))
    content = unicodedata.normalize("NFC", str(raw)).strip() if isinstance(raw, str) else ""
    content = safety.redact_secrets(content)
    if not content:
        raise SummaryOutputInvalid("the answer has no 'content' text")
    if len(content) > max_chars:
        raise SummaryOutputInvalid(
            f"the summary has {len(content)} characters; at most {max_chars} are allowed"
        )
    if safety.looks_like_instruction(content):
        raise SummaryOutputInvalid("the summary reads as an instruction, not a fact")
    refs = source_refs(cluster)
    covers = data.get("covers")
    if not isinstance(covers, list):
        raise SummaryOutputInvalid("the answer has no 'covers' list")
    named = {str(c).strip().strip("[]") for c in covers}
    missing_refs = [r for r in refs if r not in named]
    if missing_refs:
        raise SummaryOutputInvalid(f"the summary does not cover {', '.join(missing_refs)}")
    folded = content.casefold()
    lost = [
        f"{term!r} ({ref})"
        for ref, m in refs.items()
        for term in sorted(key_terms(m.content))
        if term not in folded
    ]
    if lost:
        raise SummaryOutputInvalid(f"the summary leaves out {', '.join(lost[:5])}")
    return SummaryDraft(
        content=content,
        bank=cluster.bank,
        tags=cluster.tags,
        confidence=min(m.confidence for m in cluster.members),
        first_stated_at=cluster.first_stated_at,
        last_stated_at=cluster.last_stated_at,
        source_ids=cluster.ids,
    )
