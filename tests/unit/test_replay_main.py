"""The replay's results file names and failure verdicts (bench/replay_locomo.py's main)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.replay_locomo import _output_stem, _parse_args, _problems


@pytest.mark.parametrize(
    ("argv", "stem"),
    [
        ([], "replay_locomo_conv0"),
        (["--conversation", "3", "--extraction", "per-turn"], "replay_locomo_conv3_per_turn"),
        (
            ["--chat-summary-tokens", "500", "--restart-after-turns", "40"],
            "replay_locomo_conv0_summary500_restart40",
        ),
        # an external service's own settings are not the replay's: no per-turn, no summary
        (
            ["--service-url", "http://127.0.0.1:9", "--api-key", "k", "--extraction", "per-turn"],
            "replay_locomo_conv0",
        ),
    ],
)
def test_output_stem_names_each_non_default_option(argv: list[str], stem: str) -> None:
    assert _output_stem(_parse_args(argv)) == stem


def _results(**changes: Any) -> dict[str, Any]:
    return {"extraction": {"drained": True}, "lost_turns": 0, "duplicate_memories": 0, **changes}


def test_a_clean_replay_has_no_problem() -> None:
    assert _problems(_results()) == []


def test_each_failure_is_named() -> None:
    found = _problems(_results(extraction={"drained": False}, lost_turns=2, duplicate_memories=1))
    assert found == [
        "extraction did not drain before the deadline",
        "2 accepted turns were not extracted",
        "1 memories are stored twice",
    ]
