"""`/memory add <bank>: <text>`: a mistyped bank is "unknown bank", an ordinary word before a
colon starts a fact (issue 30 item 9c)."""

from __future__ import annotations

import pytest

from service.core.commands import split_bank_prefix
from service.core.records import Bank


@pytest.mark.parametrize(
    "typed",
    [
        "Projcet: deadline is Friday",
        "personnal: I keep bees",
        "Persnoal: I keep bees",
        "interation_patterns: short answers",
        "Interation: short answers",
        "assistent: use Rust",
        "projetcs: the build uses Bazel",
    ],
)
def test_a_mistyped_bank_is_refused_with_the_valid_names(typed: str) -> None:
    with pytest.raises(ValueError, match=r"^unknown bank .*; use personal, interaction_patterns"):
        split_bank_prefix(typed)


@pytest.mark.parametrize(
    "typed",
    [
        "Note: I like tea",
        "Personally: I prefer tea",
        "Cat: Miso is grey",
        "That: is all",
        "Update: I moved to Lyon",
        "Reminder: the vet is on Friday",
        "My plan for Friday: finish the report",
        "Time: 10:30 is my standup",
    ],
)
def test_ordinary_words_before_a_colon_start_a_fact(typed: str) -> None:
    assert split_bank_prefix(typed) == (None, typed)


@pytest.mark.parametrize(
    ("typed", "bank"),
    [
        ("personal: I keep bees", Bank.PERSONAL),
        ("Project: deadline is Friday", Bank.PROJECT),
        ("interaction_patterns: short answers", Bank.INTERACTION),
        ("chat: we draft a toast", Bank.CHAT),
    ],
)
def test_a_real_bank_still_picks_the_bank(typed: str, bank: Bank) -> None:
    assert split_bank_prefix(typed)[0] is bank
