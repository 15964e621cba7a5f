"""Data sets that live outside the repository (`../shared/data/…`), for the tests that pin
their counts.

Without the data a test skips with a sentence saying how to get it, so a clone of the
repository alone passes `make test`; with `MEMORY_TESTS_REQUIRE_DATA=1` (set by .ci/run) a
missing data set fails the test instead, so CI never skips them silently. The code those tests
exercise is also covered by small fixtures of our own (tests/support/locomo_sample.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["REQUIRE_DATA", "require"]

REQUIRE_DATA = "MEMORY_TESTS_REQUIRE_DATA"
"""Environment variable: "1" turns a missing data set from a skip into a failure."""


def require(path: Path, *, name: str, how: str) -> Path:
    """`path` when it exists; else skip the test (or fail it under MEMORY_TESTS_REQUIRE_DATA=1).

    Args:
        name: the data set, as a reader knows it ("LoCoMo's locomo10.json").
        how: a sentence saying how to get it.
    """
    if path.exists():
        return path
    sentence = f"{name} is not at {path}: {how}"
    if os.environ.get(REQUIRE_DATA) == "1":
        pytest.fail(f"{sentence} ({REQUIRE_DATA}=1: data-set tests must run here)")
    pytest.skip(sentence)
