"""Scripted answers of the LLM stand-in for the summarizer's requests.

A summary request (`service/core/consolidation/summary.py`, `build_summary_messages`) lists its
sources inside `<source_memories>` as `[s1] (YYYY-MM-DD) text` lines. `faithful_merge`
answers with the sources' texts joined by "; " — each followed by its date when the sources
were stated on different days — and covers every source: a merge that loses nothing by
construction, so what a test or benchmark measures is the machinery around it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["faithful_merge", "is_summary_request", "source_lines", "with_summaries"]

_SOURCES = re.compile(r"<source_memories>\n(.*?)\n</source_memories>", re.DOTALL)
_LINE = re.compile(r"^\[(s\d+)\] \((\d{4}-\d{2}-\d{2})\) (.*)$")

Responder = Callable[[dict[str, Any]], str]


def _last_text(request: dict[str, Any]) -> str:
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    for message in reversed(messages):
        content = message.get("content")
        if isinstance(content, str) and "<source_memories>" in content:
            return content
    return ""


def source_lines(request: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(ref, date, text) of every source in a summary request; [] for other requests."""
    found = _SOURCES.search(_last_text(request))
    if not found:
        return []
    return [
        (m.group(1), m.group(2), m.group(3))
        for line in found.group(1).splitlines()
        if (m := _LINE.match(line))
    ]


def is_summary_request(request: dict[str, Any]) -> bool:
    """True for a request of the summarizer."""
    return bool(source_lines(request))


def faithful_merge(request: dict[str, Any]) -> str:
    """`{"content": "fact A (date); fact B (date)", "covers": [every ref]}`."""
    sources = source_lines(request)
    dated = len({date for _, date, _ in sources}) > 1
    content = "; ".join(f"{text} ({date})" if dated else text for _, date, text in sources)
    return json.dumps(
        {"content": content, "covers": [ref for ref, _, _ in sources]}, ensure_ascii=False
    )


def with_summaries(responder: Responder, summarize: Responder = faithful_merge) -> Responder:
    """Answer summary requests with `summarize`, everything else with `responder`."""

    def respond(request: dict[str, Any]) -> str:
        if is_summary_request(request):
            return summarize(request)
        return responder(request)

    return respond
