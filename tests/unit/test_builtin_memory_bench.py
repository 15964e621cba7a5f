"""The bench's reproduction of Open WebUI's memory block: what counts as injected, and the
PrefEval users it builds (the text itself is checked against Open WebUI's own code in
tests/integration/test_builtin_memory_equality.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench.builtin_memory import DEFAULT_PREFEVAL, OwuiMemory, owui_inject, prefeval_pools


def _memories(n: int, kind: str = "context") -> list[OwuiMemory]:
    return [OwuiMemory(f"m{i}", f"fact number {i:02d} " + "x" * 40, kind) for i in range(n)]


def test_only_the_top_8_of_the_search_are_injected_sorted_by_text() -> None:
    memories = _memories(12)
    ranked = [f"m{i}" for i in (11, 3, 7, 0, 9, 1, 5, 2, 4, 6)]
    shown = owui_inject(memories, "a question", ranked)
    assert sorted(shown.whole) == sorted(ranked[:8]) and not shown.cut
    lines = shown.text.splitlines()
    assert lines[0] == "<memory_context>" and lines[1] == "[Relevant Context]"
    assert lines[2:-1] == sorted(lines[2:-1]) and lines[-1] == "</memory_context>"


def test_a_line_past_the_limit_is_cut_and_not_counted_whole() -> None:
    memories = _memories(8)  # each line is "- " + 55 characters
    shown = owui_inject(memories, "q", [m.id for m in memories], context_limit=300)
    body = shown.text.removeprefix("<memory_context>\n").removesuffix("\n</memory_context>")
    assert len(body) == 300
    # the title (18 + newline) and four lines of 57 + newline fit (251); the fifth is cut
    assert len(shown.whole) == 4 and len(shown.cut) == 1
    for memory_id in shown.whole:
        assert f"- fact number {memory_id[1:].zfill(2)}" in body


def test_user_memories_all_come_first_and_the_search_adds_none_of_them_twice() -> None:
    memories = _memories(60, "user")
    shown = owui_inject(memories, "q", ["m59", "m58"])
    assert shown.text.count("[User Memory]") == 1 and "[Relevant Context]" not in shown.text
    # 2,000 characters hold the title (13 + newline) and the alphabetically first 34 lines of
    # 57 + newline whole (ending at 1,985); the 35th starts at 1,986 and is cut
    assert shown.whole == tuple(f"m{i}" for i in range(34)) and shown.cut == ("m34",)


def test_nothing_is_injected_without_memories() -> None:
    assert owui_inject([], "q", []).text == ""


@pytest.mark.skipif(
    not DEFAULT_PREFEVAL.exists(), reason=f"PrefEval data not at {DEFAULT_PREFEVAL}"
)
def test_prefeval_gives_each_user_100_preferences_and_an_even_share_of_every_topic() -> None:
    pools, questions = prefeval_pools(DEFAULT_PREFEVAL)
    topics = {p.stem for p in Path(DEFAULT_PREFEVAL).glob("*.json")}
    assert len(pools) == 10 and all(len(p.texts) == 100 for p in pools)
    counts = [Counter(next(iter(c)).split("#")[0] for c in pool.covers) for pool in pools]
    for topic in topics:
        shares = [c[topic] for c in counts]
        assert min(shares) >= 1 and max(shares) - min(shares) <= 1
    for pool in pools:
        assert [e for _, e in questions[pool.owner_id]] == [next(iter(c)) for c in pool.covers]
    assert prefeval_pools(DEFAULT_PREFEVAL)[0][3].texts == pools[3].texts  # seeded


def test_a_folder_without_topic_files_is_refused_with_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no PrefEval topic files"):
        prefeval_pools(tmp_path)
