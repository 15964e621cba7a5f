"""The secret redactor on corpus v2 (tests/corpora/secrets_v2.json, written by
make_secrets_v2.py from the issuers' documented formats): the goals of issue 27 on the
report half, which the rules were not tuned on — at least 97 % of the secrets caught, at
most 2 % of the look-alikes changed. The figures of both halves are in
docs/discussions/secrets-and-instructions.md."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from service.core import safety

CORPUS: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "corpora" / "secrets_v2.json").read_text()
)
GOAL_CAUGHT = 0.97
GOAL_DAMAGED = 0.02


def redacted(case: dict[str, Any]) -> str:
    """What is kept of a case: its two messages redacted as one conversation, or its text."""
    if "parts" in case:
        conversation = safety.redact_conversation([("user", part) for part in case["parts"]])
        return "\n".join(text for _, text in conversation)
    return safety.redact_secrets(case["text"])


def leaked(case: dict[str, Any]) -> bool:
    out = redacted(case)
    return any(value in out for value in case["hide"])


def half(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return (
        [c for c in CORPUS["secrets"] if c["split"] == name],
        [c for c in CORPUS["lookalikes"] if c["split"] == name],
    )


def test_the_corpus_has_the_size_and_variety_the_issue_asks_for() -> None:
    secrets, lookalikes = CORPUS["secrets"], CORPUS["lookalikes"]
    assert len(secrets) >= 300
    assert len({c["kind"] for c in secrets}) >= 40
    assert len(lookalikes) >= 150
    assert Counter(c["split"] for c in secrets).keys() == {"tune", "report"}
    assert Counter(c["split"] for c in lookalikes).keys() == {"tune", "report"}
    assert sum("parts" in c for c in secrets if c["split"] == "report") >= 10
    # one text per case, and every hidden value is really in its text
    assert len({c["text"] for c in lookalikes}) == len(lookalikes)
    for case in secrets:
        whole = "\n".join(case.get("parts") or [case["text"]])
        assert case["hide"] and all(value in whole for value in case["hide"]), case


@pytest.mark.parametrize("name", ["tune", "report"])
def test_each_half_meets_the_goals(name: str) -> None:
    secrets, lookalikes = half(name)
    missed = [c["text"] for c in secrets if leaked(c)]
    damaged = {
        c["text"]: out for c in lookalikes if (out := safety.redact_secrets(c["text"])) != c["text"]
    }
    caught = 1 - len(missed) / len(secrets)
    assert caught >= GOAL_CAUGHT, missed
    assert len(damaged) / len(lookalikes) <= GOAL_DAMAGED, damaged


def test_redaction_is_idempotent_over_the_corpus() -> None:
    for case in CORPUS["secrets"]:
        once = redacted(case)
        assert safety.redact_secrets(once) == once


@pytest.mark.parametrize(
    ("previous", "text", "expected"),
    [
        ("my password is", "hunter2-Blue", "[redacted password]"),
        ("mot de passe :", "Soleil-42 voilà", "[redacted password] voilà"),
        ("パスワードは", "abc123", "[redacted password]"),
        ("what is my password?", "it is in the drawer", "it is in the drawer"),
        ("my password is", "OK", "OK"),
        ("the passcode is", "6 digits long", "6 digits long"),
    ],
)
def test_a_label_that_ends_a_message_takes_the_start_of_the_next(
    previous: str, text: str, expected: str
) -> None:
    assert safety.redact_secrets(text, previous=previous) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # issue 27's misses, one per kind
        ("glrt-t3sT9xYzQ2mN8kLp4vRw", "[redacted key]"),
        ("SLACK_APP_TOKEN=xapp-1-A0123456789-1234567890123-" + "ab" * 32, None),
        ("mailgun key-" + "0123456789abcdef" * 2, "mailgun [redacted key]"),
        ("shpat_" + "0a1b2c3d" * 4, "[redacted key]"),
        ("https://x.blob.core.windows.net/c?sv=2022-11-02&sig=AbC%2Bd1E2f3G4h5", None),
        ("DB_PASSWORD=swordfish", "DB_PASSWORD=[redacted password]"),
        ("sshpass -p 'Tr0ub4dor' ssh me@host", "sshpass -p '[redacted password]' ssh me@host"),
        ("curl -u ada:Lovelace1815 https://api", "curl -u ada:[redacted password] https://api"),
        ("WIFI:T:WPA;S:Home;P:sunflower;;", "WIFI:T:WPA;S:Home;P:[redacted password];;"),
        ("Passwort ist Sonnenblume", "Passwort ist [redacted password]"),
        ("мой пароль — qwerty123", "мой пароль — [redacted password]"),
        ("kata sandi saya adalah rahasia99", "kata sandi saya adalah [redacted password]"),
        ("the combination is 12 34 56", None),
        ("recovery codes: 3f2a1-9bc04 77d1e-0aa3f", None),
        # look-alikes of issue 27
        ("order 4539578763621486 arrived", "order 4539578763621486 arrived"),
        ("IMEI 356938035643809", "IMEI 356938035643809"),
        ("the passcode is 6 digits long", "the passcode is 6 digits long"),
        ("my API key was revoked", "my API key was revoked"),
    ],
)
def test_the_forms_of_issue_27(text: str, expected: str | None) -> None:
    out = safety.redact_secrets(text)
    if expected is None:
        assert "[redacted" in out and out != text
    else:
        assert out == expected
