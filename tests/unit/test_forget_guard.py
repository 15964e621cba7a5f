"""The forget guard's fingerprint (service/core/forget_guard.py), without embeddings: what it
keeps, what it recognises at a given cosine, and what it refuses to read."""

from __future__ import annotations

import json

import pytest

from service.core import forget_guard
from service.core.forget_guard import Fingerprint

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
REX = "User has a dog named Rex"


def test_a_fingerprint_is_the_same_for_the_same_text_and_key_and_differs_by_key() -> None:
    assert forget_guard.fingerprint(REX, KEY) == forget_guard.fingerprint(REX, KEY)
    ours, theirs = forget_guard.fingerprint(REX, KEY), forget_guard.fingerprint(REX, OTHER_KEY)
    assert ours.text != theirs.text and not (ours.words & theirs.words)


def test_a_fingerprint_round_trips_through_json_and_holds_no_word() -> None:
    memory = forget_guard.fingerprint("User does not drink coffee since March 2024", KEY)
    stored = json.dumps(memory.to_json())
    assert Fingerprint.from_json(json.loads(stored)) == memory
    assert memory.negated is True
    assert len(memory.words) == 8 and len(memory.distinguishing) == 2  # march, 2024
    for word in ("coffee", "drink", "march", "2024", "since"):
        assert word not in stored.casefold()


@pytest.mark.parametrize(
    ("proposed", "cosine", "restated"),
    [
        (REX, 0.2, True),  # the same normalized text, whatever the vectors say
        ("user has a dog named rex!", 0.2, True),
        ("The user has a dog named Rex", 0.98, True),  # above the dedup cosine
        ("User owns a dog named Rex", 0.93, True),  # a rewording: cosine ≥ 0.90, same words
        ("User owns a dog named Rex", 0.84, False),  # … but not at this cosine
        ("Rex is the user's dog", 0.855, True),  # other words, the same content words
        ("User has a cat named Rex", 0.88, False),  # "cat" replaced "dog"
        ("User has a dog named Max", 0.99, False),  # another name, however close
        ("User has 2 dogs named Rex", 0.99, False),  # a number
        ("User does not have a dog named Rex", 0.99, False),  # a negation
        ("User walks a dog every day", 0.91, False),  # other words
    ],
)
def test_restates_follows_same_fact_and_meaning(
    proposed: str, cosine: float, restated: bool
) -> None:
    memory = forget_guard.fingerprint(REX, KEY)
    assert forget_guard.restates(proposed, cosine, memory, KEY, cosine_threshold=0.97) is restated


def test_a_fingerprint_made_with_another_key_recognises_nothing_but_by_cosine() -> None:
    memory = forget_guard.fingerprint(REX, OTHER_KEY)
    assert forget_guard.restates(REX, 0.5, memory, KEY, cosine_threshold=0.97) is False


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"text": "a", "words": ["b"], "distinguishing": []},  # no negation
        {"text": "a", "words": 5, "distinguishing": [], "negated": False},
    ],
)
def test_a_damaged_fingerprint_is_refused(data: dict[str, object]) -> None:
    with pytest.raises((KeyError, TypeError)):
        Fingerprint.from_json(data)


def test_content_stems_leave_out_the_verbs_of_having_and_naming() -> None:
    assert forget_guard.content_stems(REX) == {"dog", "rex"}
    assert forget_guard.content_stems("User's pet dog goes by the name Rex") == {
        "pet",
        "dog",
        "rex",
    }
    assert forget_guard.content_stems("nursing") == forget_guard.content_stems("nurse")
    assert forget_guard.content_stems("likes") != forget_guard.content_stems("dislikes")


def test_a_guard_written_before_content_stems_still_reads() -> None:
    data = forget_guard.fingerprint(REX, KEY).to_json()
    del data["content"]
    memory = Fingerprint.from_json(data)
    assert memory.content is None
    assert (
        forget_guard.restates("Rex is the user's dog", 0.9, memory, KEY, cosine_threshold=0.97)
        is False
    )
