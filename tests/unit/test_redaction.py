"""The secret redactor on its corpus: every secret caught, every look-alike kept as is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.core import safety

CORPUS: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "corpora" / "secrets.json").read_text()
)


def _leaks(case: dict[str, Any]) -> list[str]:
    """What is wrong with the redaction of one secret case ([] when nothing)."""
    out = safety.redact_secrets(case["text"])
    problems = [f"kept {s!r}" for s in case["hide"] if s in out]
    problems += [f"lost {k!r}" for k in case.get("keep", []) if k not in out]
    if "[redacted" not in out:
        problems.append("no placeholder")
    return problems


def test_the_corpus_is_big_enough_to_measure() -> None:
    assert len(CORPUS["secrets"]) >= 60
    assert len(CORPUS["lookalikes"]) >= 40


def test_every_secret_of_the_corpus_is_redacted_and_its_label_kept() -> None:
    failures = {c["text"]: p for c in CORPUS["secrets"] if (p := _leaks(c))}
    assert failures == {}


def test_no_lookalike_of_the_corpus_is_changed() -> None:
    damaged = {
        text: out for text in CORPUS["lookalikes"] if (out := safety.redact_secrets(text)) != text
    }
    assert damaged == {}


def test_redaction_is_idempotent_over_the_corpus() -> None:
    for case in CORPUS["secrets"]:
        once = safety.redact_secrets(case["text"])
        assert safety.redact_secrets(once) == once


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("home wifi password: Tr0ub4dor3x", "home wifi password: [redacted password]"),
        ("my bank pin: 7391", "my bank pin: [redacted PIN]"),
        ("my card is 4111 1111 1111 1111.", "my card is [redacted card number]."),
        ("the key sk_live_51HqLyjWDarjtT1zdp7dcXYZa", "the key [redacted key]"),
        ("db postgres://app:S3cret@db:5432/x", "db postgres://app:[redacted password]@db:5432/x"),
    ],
)
def test_a_secret_is_replaced_by_a_placeholder_naming_its_kind(text: str, expected: str) -> None:
    assert safety.redact_secrets(text) == expected


def test_a_fact_that_is_only_a_placeholder_counts_as_mostly_redacted() -> None:
    assert safety.mostly_redacted("PIN: [redacted PIN]")
    assert not safety.mostly_redacted("User's home wifi password is [redacted password]")
    assert not safety.mostly_redacted("User likes cats")
