"""The near-duplicate policy (service/core/dedup.py, DESIGN §5.4), without embeddings."""

from __future__ import annotations

import pytest

from service.core import dedup

THRESHOLDS = {"text_threshold": 0.95, "cosine_threshold": 0.97}


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("User's sister is named Jane", "User's sister is named Jana"),
        ("User was born in 1988", "User was born in 1989"),
        ("User's wedding is on 2026-06-12", "User's wedding is on 2026-06-13"),
        ("User's exam is in July", "User's exam is in June"),
        ("User eats meat", "User doesn't eat meat"),
        ("User smokes", "User no longer smokes"),
        ("User wohnt in Berlin", "User wohnt nicht in Berlin"),
        ("User has one brother", "User has two brothers"),
        ("User speaks French", "User speaks French and German"),
    ],
)
def test_facts_that_differ_in_a_number_date_name_or_negation_disagree(a: str, b: str) -> None:
    assert dedup.disagree(a, b) is True
    # however close they look, similarity does not merge them
    assert dedup.same_fact(b, a, 0.999, **THRESHOLDS) is False


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("User has two children", "User has 2 children"),
        ("User does not eat meat", "User doesn't eat meat"),
        ("USER LIVES IN BERLIN", "user lives in berlin"),
        ("User has a sister named Jane", "The user has a sister called Jane."),
        ("User's birthday is on 14 March", "User's birthday is on March 14"),
    ],
)
def test_rewordings_that_keep_numbers_dates_names_and_negations_agree(a: str, b: str) -> None:
    assert dedup.disagree(a, b) is False


def test_a_rewording_merges_only_with_close_meaning_and_the_same_words() -> None:
    a, b = "User has a sister named Jane", "The user has a sister named Jane."
    assert dedup.same_fact(b, a, 0.944, **THRESHOLDS) is True
    assert dedup.same_fact(b, a, 0.85, **THRESHOLDS) is False
    # same meaning by the model, different words: not enough without the founding 0.97
    assert (
        dedup.same_fact(
            "User has a younger sister", "User has an older sister", 0.966, **THRESHOLDS
        )
        is False
    )


def test_an_update_is_unchanged_only_when_its_text_is_the_same_up_to_spacing() -> None:
    assert dedup.is_unchanged(" User lives in  Berlin ", "User lives in Berlin") is True
    assert dedup.is_unchanged("User lives in berlin", "User lives in Berlin") is False
    assert dedup.is_unchanged("User lives in Berlin.", "User lives in Berlin") is False


def test_only_deletes_whose_memory_is_restated_without_disagreement_are_dropped() -> None:
    deletes = [("m1", "User lives in Berlin"), ("m2", "User eats meat"), ("m3", "User has a cat")]
    restated = [
        ("m1", "The user lives in Berlin", 0.986),
        ("m2", "User does not eat meat", 0.925),
        ("m3", "User lives in Berlin", 0.2),
        ("m9", "User lives in Berlin", 1.0),  # not a DELETE of this answer
    ]
    assert dedup.restated_deletes(deletes, restated, **THRESHOLDS) == {"m1"}
