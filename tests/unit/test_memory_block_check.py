"""The e2e suite's check that no injected block holds a fact twice (tests/support/memory_blocks.py)
finds the blocks the service renders and every kind of repeat, and passes distinct facts."""

from __future__ import annotations

from typing import Any

import pytest

from service.core import ranking
from tests.support import memory_blocks

NOTE = ranking.DATA_NOTE


def _request(*parts: str, system: str = "You are helpful.") -> dict[str, Any]:
    """A chat request whose system message ends with a block made of `parts`."""
    block = "\n\n".join([*parts, NOTE])
    return {
        "messages": [
            {"role": "system", "content": f"{system}\n\n{block}"},
            {"role": "user", "content": "Hello"},
        ]
    }


def _profile(text: str) -> str:
    return f"<userMemories>\n{text}\n</userMemories>"


def _items(*facts: str) -> str:
    return "\n".join([ranking.RECALL_HEADER, *(f"- [2026-11-30] {f}" for f in facts)])


def _core(*facts: str) -> str:
    return _profile("\n".join(f"- [2026-11-29] {f}" for f in facts))


#: blocks that hold one fact twice, each in another way
REPEATS = {
    "item twice": _request(_items("User keeps bees", "User keeps bees")),
    "item twice, case and dot": _request(_items("User keeps bees.", "user keeps  BEES")),
    "core memory and item": _request(_core("User keeps bees"), _items("User keeps bees")),
    "core memory twice": _request(_core("User keeps bees", "User keeps bees")),
    "profile holds the item": _request(
        _profile("User keeps bees on a rooftop in Lyon. User plays the cello."),
        _items("User keeps bees on a rooftop in Lyon"),
    ),
    "profile names the user": _request(
        _profile("Dana keeps bees on a rooftop in Lyon and plays the cello."),
        _items("User keeps bees on a rooftop in Lyon"),
    ),
    "two blocks": {
        "messages": [
            {"role": "system", "content": "\n\n".join([_items("User keeps bees"), NOTE])},
            {"role": "system", "content": "\n\n".join([_items("User plays chess"), NOTE])},
        ]
    },
    "two recall parts": _request(_items("User keeps bees"), _items("User plays chess")),
}
#: blocks of distinct facts that share words, numbers or a subject
DISTINCT = {
    "other facts": _request(_items("User keeps bees", "User keeps two cats")),
    "numbers differ": _request(_items("User has 2 children", "User has 3 children")),
    "negation": _request(_items("User likes tea", "User does not like tea")),
    "core and other item": _request(_core("User keeps bees"), _items("User plays the cello")),
    "profile of other facts": _request(
        _profile("Dana plays the cello in an amateur orchestra."),
        _items("User keeps bees on a rooftop in Lyon"),
    ),
    "a two-word predicate is not compared": _request(
        _profile("Dana says she likes tea with honey from her own bees."),
        _items("User likes tea"),
    ),
    "profile only": _request(_profile("Dana keeps bees.")),
    "items only": _request(_items("User keeps bees", "User lives in Lyon")),
}


@pytest.mark.parametrize("case", sorted(REPEATS))
def test_a_repeated_fact_or_a_second_block_is_reported(case: str) -> None:
    report = memory_blocks.check_request(REPEATS[case])
    assert report.blocks >= 1
    assert len(report.problems) >= 1, case


@pytest.mark.parametrize("case", sorted(DISTINCT))
def test_distinct_facts_pass(case: str) -> None:
    report = memory_blocks.check_request(DISTINCT[case])
    assert (report.blocks, report.problems) == (1, [])


def test_counts_over_the_corpus() -> None:
    caught = sum(bool(memory_blocks.check_request(r).problems) for r in REPEATS.values())
    passed = sum(not memory_blocks.check_request(r).problems for r in DISTINCT.values())
    assert (caught, passed) == (len(REPEATS), len(DISTINCT)) == (8, 8)


def test_a_request_without_memories_has_no_block() -> None:
    plain = {"messages": [{"role": "system", "content": "You are helpful."}]}
    assert memory_blocks.check_requests([plain, plain]) == (0, [])


def test_the_block_the_service_renders_is_read_with_its_facts_and_profile() -> None:
    report = memory_blocks.check_request(
        _request(_profile("Dana plays the cello."), _items("User keeps bees", "User lives in Lyon"))
    )
    assert report.blocks == 1
    assert report.facts == ["User keeps bees", "User lives in Lyon"]
    assert report.profile == "Dana plays the cello."


def test_the_markers_are_the_services() -> None:
    assert memory_blocks.RECALL_HEADER == ranking.RECALL_HEADER
    assert ranking.DATA_NOTE.startswith(memory_blocks.DATA_NOTE)
    assert ranking.render_block(profile="x", core=[], items=[]).startswith(
        memory_blocks.PROFILE_OPEN
    )
