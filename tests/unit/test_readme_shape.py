"""The README stays a newcomer's start and the docs stay findable (issue 29 item 11: the README
was 526 lines with the median sentence at 32 words, and nothing listed the docs).

Sentences are counted in prose only: code blocks, tables, headings and images are left out,
list items and paragraphs are split after `.`, `!`, `?` or `:` followed by a capital or code.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

README_MAX_LINES = 200
"""The issue's "at most ~200 lines"."""

MEDIAN_SENTENCE_MAX_WORDS = 20
"""The brief's "keep sentences short (median ≤ 20 words)"."""

_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+(?=[A-Z`*\[(“\"])")
_LIST_ITEM = re.compile(r"^(\d+\.|[-*])\s+")


def sentence_lengths(markdown: str) -> list[int]:
    """Words per prose sentence of `markdown` (sentences of fewer than 3 words are left out)."""
    lengths: list[int] = []
    paragraph: list[str] = []

    def close() -> None:
        for sentence in _SENTENCE_END.split(" ".join(paragraph)):
            if len(sentence.split()) >= 3:
                lengths.append(len(sentence.split()))
        paragraph.clear()

    fenced = False
    for line in markdown.splitlines():
        text = line.strip()
        if text.startswith("```"):
            fenced = not fenced
            close()
            continue
        if fenced or not text or text.startswith(("|", "#", "<!--", "![")):
            close()
            continue
        if _LIST_ITEM.match(text):
            close()
            text = _LIST_ITEM.sub("", text)
        paragraph.append(text)
    close()
    return lengths


def test_the_readme_is_short_and_so_are_its_sentences() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lengths = sentence_lengths(readme)
    assert len(readme.splitlines()) <= README_MAX_LINES
    assert statistics.median(lengths) <= MEDIAN_SENTENCE_MAX_WORDS


def test_sentences_are_counted_in_prose_only() -> None:
    text = (
        "# A heading that is long enough to count\n\n"
        "One short sentence here. Another one follows it: `code` starts the next one.\n"
        "- a list item of five words\n\n"
        "```\nnot a sentence at all, it is code\n```\n"
        "| a | table | row | is | not | prose |\n"
    )
    assert sentence_lengths(text) == [4, 4, 5, 6]


def test_every_docs_page_is_in_the_docs_index() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = {
        (ROOT / "docs" / target).resolve()
        for target in re.findall(r"\]\(([^)\s#]+\.md)(?:#[^)]*)?\)", index)
    }
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*.md")} - {(ROOT / "docs" / "README.md")}
    assert sorted(str(p.relative_to(ROOT)) for p in pages - linked) == []
