"""A fact copied from the extraction prompt's examples is recognised (issue 24: Qwen2.5-1.5B
wrote "User has two beehives on their balcony" for a LoCoMo speaker who spoke of her dogs)."""

from __future__ import annotations

import re

import pytest

from service.core.extraction import EXAMPLE_MARKERS, SYSTEM_PROMPT, copies_an_example


@pytest.mark.parametrize("marker", EXAMPLE_MARKERS)
def test_every_marker_is_a_word_of_the_examples(marker: str) -> None:
    assert re.search(rf"\b{marker}", SYSTEM_PROMPT.casefold())


@pytest.mark.parametrize(
    "fact",
    [
        "User has two beehives on their balcony",  # the real model's answer
        "User has had two beehives for 3 years",
        "User works as a tram driver in Tampere",
        "User's brother Ilkka finds trams boring",
    ],
)
def test_a_copied_example_is_recognised(fact: str) -> None:
    said = ["I've had my dogs Pepper and Panda for 3 years.", "We walk two hours a day."]
    assert copies_an_example(fact, said)


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        ("User keeps two beehives on their balcony", ["I keep two beehives on my balcony."]),
        ("User takes the tram to work", ["I take the tram to work every day."]),
        ("User prefers short answers", ["keep it brief please"]),  # no marker at all
        ("User lives in Tampere", ["Moving to Tampere next month!"]),
        ("User dislikes trampolines", ["trampolines scare me"]),  # said, though a marker start
    ],
)
def test_the_users_own_words_are_not_taken_for_a_copy(fact: str, said: list[str]) -> None:
    assert not copies_an_example(fact, said)
