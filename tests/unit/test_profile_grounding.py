"""A profile says only what its notes say: no invented name, age, place or number.

Found by `make h2h` with Qwen2.5-1.5B: the profile injected with every question read
"Name: Sarah Age: 35 Occupation: Dog owner" for a user called Audrey whose memories gave
neither a name nor an age.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from service.core.profile import grounded_profile
from service.core.records import Bank, Memory, OwnerKind, SourceKind, Status

WHEN = datetime(2026, 12, 4, tzinfo=UTC)


def _notes(*texts: str) -> list[Memory]:
    return [
        Memory(
            id=uuid.uuid4(),
            seq=seq,
            owner_kind=OwnerKind.USER,
            owner_id="audrey",
            bank=Bank.PERSONAL,
            content=text,
            tags=(),
            confidence=0.9,
            status=Status.ACTIVE,
            source_kind=SourceKind.EXTRACTION,
            source_chat_id=None,
            source_message_id=None,
            created_at=WHEN,
            updated_at=WHEN,
            last_used_at=None,
        )
        for seq, text in enumerate(texts, start=1)
    ]


NOTES = _notes(
    "Audrey has four dogs",
    "Audrey lives in Portland",
    "Audrey goes hiking with her dogs on Sundays",
    "Audrey started a pottery class in 2023",
)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # the measured answer: the invented name and age go, the grounded record stays
        ("Name: Sarah Age: 35 Occupation: Dog owner", "Occupation: Dog owner."),
        (
            "Audrey has four dogs and lives in Portland. She is 35 years old.",
            "Audrey has four dogs and lives in Portland.",
        ),
        ("Audrey lives in Portland; she works at Google.", "Audrey lives in Portland."),
        ("Audrey hikes on Sundays.\nShe moved from Boston in 2019.", "Audrey hikes on Sundays."),
    ],
)
def test_invented_names_and_numbers_are_dropped(answer: str, expected: str) -> None:
    assert grounded_profile(answer, memories=NOTES, user_name="Audrey") == expected


@pytest.mark.parametrize(
    "answer",
    [
        "Audrey has 4 dogs, lives in Portland and takes a pottery class since 2023.",
        "Audrey lives in Portland; she hikes with her dogs on Sundays.",
        "Name: Audrey\nHome: Portland\nPets: four dogs",
        "Audrey vit à Portland avec ses 4 chiens.",
        "She enjoys the outdoors and her pottery class.",
    ],
)
def test_a_grounded_profile_is_kept_unchanged(answer: str) -> None:
    assert grounded_profile(answer, memories=NOTES, user_name="Audrey") == answer


def test_nothing_grounded_leaves_no_profile() -> None:
    assert grounded_profile("Name: Sarah Age: 35", memories=NOTES, user_name="Audrey") is None


def test_the_users_name_counts_as_known_even_if_no_note_holds_it() -> None:
    notes = _notes("User has four dogs")
    answer = "The user, Audrey, has four dogs."
    assert grounded_profile(answer, memories=notes, user_name="Audrey") == answer
    assert grounded_profile(answer, memories=notes, user_name=None) is None


def test_a_sentences_first_word_is_not_read_as_a_name() -> None:
    """Every sentence starts with a capital ("She", "Elle"), so its first word is not
    checked; an invented name there passes unless a label or a number gives it away."""
    assert grounded_profile("Sarah has four dogs.", memories=NOTES) == "Sarah has four dogs."
    assert grounded_profile("Sarah, 35, has four dogs.", memories=NOTES) is None
