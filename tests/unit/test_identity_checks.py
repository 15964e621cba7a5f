"""The whose-fact checks of service/core/identity.py on pairs of (fact, message)."""

from __future__ import annotations

import pytest

from service.core import identity


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        ("User can't stand cilantro", "My brother can't stand cilantro."),
        ("User is allergic to peanuts", "She is allergic to peanuts, so no satay tonight."),
        ("User works night shifts", "My wife works night shifts at the hospital."),
    ],
)
def test_a_fact_the_message_says_of_someone_else_is_misattributed(fact: str, message: str) -> None:
    assert identity.misattributed(fact, message)


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        ("User has a sister named Jane", "My sister Jane lives in Oslo."),
        ("User's brother can't stand cilantro", "My brother can't stand cilantro."),
        ("User loves hiking in the Alps", "My wife and I love hiking in the Alps."),
        ("User plays the cello", "My sister Noor is a biologist, and I play the cello."),
        ("User lives in Lyon", "I moved to Lyon last spring."),
        ("User is vegetarian", "Quick note: vegetarian."),
    ],
)
def test_a_fact_of_the_users_own_is_not_misattributed(fact: str, message: str) -> None:
    assert not identity.misattributed(fact, message)


@pytest.mark.parametrize(
    ("fact", "name", "contradicts"),
    [
        ("User's name is Jane Ortiz", "Robin Meyer", True),
        ("El usuario se llama Luis Ortega", "Robin Meyer", True),
        ("Der Nutzer heißt Jan", "Robin Meyer", True),
        ("User's name is Robin", "Robin Meyer", False),
        ("User's last name is Meyer", "Robin Meyer", False),
        ("User's name is Alexander", "Alex", False),
        ("User's name is Jane Ortiz", None, False),
        ("User's sister is named Jane", "Robin Meyer", False),
        ("User's customer is Jane Ortiz", "Robin Meyer", False),
    ],
)
def test_only_a_name_that_shares_no_word_with_the_account_contradicts_it(
    fact: str, name: str | None, contradicts: bool
) -> None:
    assert identity.contradicts_user_name(fact, name) is contradicts
