"""One block per turn: the profile and the items under one budget, no fact twice."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from service.core import injection
from service.core.records import Bank, Memory, OwnerKind, RankedMemory, SourceKind, Status
from service.core.tokens import estimate_tokens

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _memory(seq: int, content: str) -> Memory:
    return Memory(
        id=uuid.uuid4(),
        seq=seq,
        owner_kind=OwnerKind.USER,
        owner_id="u",
        bank=Bank.PERSONAL,
        content=content,
        tags=(),
        confidence=0.9,
        status=Status.ACTIVE,
        source_kind=SourceKind.MANUAL,
        source_chat_id=None,
        source_message_id=None,
        created_at=NOW,
        updated_at=NOW,
        last_used_at=None,
    )


def _ranked(seq: int, content: str) -> RankedMemory:
    return RankedMemory(_memory(seq, content), 0.8, 0.8)


PROFILE = (
    "Pat is vegetarian and lives in Valencia. Pat owns a beagle called Pepper. "
    "Pat works night shifts as a nurse. Pat is learning the bassoon."
)

# (memory, profile it is or is not in): a profile rewords its notes, so a fact counts as
# held when three quarters of its content words are there
HELD = [
    ("User is vegetarian", PROFILE),
    ("User lives in Valencia", PROFILE),
    ("User owns a beagle named Pepper", PROFILE),
    ("User's dog is a beagle called Pepper", PROFILE),
    ("User works night shifts", PROFILE),
    ("User works as a nurse", PROFILE),
    ("User is learning the bassoon", PROFILE),
    ("user is LEARNING the Bassoon.", PROFILE),
    ("The user lives in Valencia", PROFILE),
    ("Pepper is a beagle", PROFILE),
    ("Usuario vive en València", "El usuario vive en Valencia y es vegetariano."),
    ("Der Nutzer ist Vegetarier", "Der Nutzer ist Vegetarier und wohnt in Köln."),
    ("Nutzer wohnt in Köln", "Der Nutzer ist Vegetarier und wohnt in Koln."),
    ("L'utilisateur joue du basson", "L'utilisateur joue du basson depuis 2024."),
    ("User has two cats, Miso and Tofu", "Sam has two cats, Miso and Tofu, and a garden."),
    ("User prefers short answers", "Sam prefers short answers and dislikes emojis."),
    ("User dislikes emojis", "Sam prefers short answers and dislikes emojis."),
    ("User was born in 1990", "Sam was born in 1990 in Porto."),
    ("User was born in Porto", "Sam was born in 1990 in Porto."),
    ("User's sister is called Ana", "Sam's sister is called Ana and lives in Lima."),
]
NOT_HELD = [
    ("User is allergic to penicillin", PROFILE),
    ("User lives in Madrid", PROFILE),
    ("User owns a cat named Pepper", PROFILE),
    ("User is learning the violin", PROFILE),
    ("User works day shifts at a bakery", PROFILE),
    ("User's beagle Pepper is afraid of storms", PROFILE),
    ("User plans to move to Lisbon in October", PROFILE),
    ("User eats fish on Fridays", PROFILE),
    ("User sold the bassoon in May", PROFILE),
    ("User's nurse training ends in July", PROFILE),
    ("Usuario vive en Sevilla", "El usuario vive en Valencia y es vegetariano."),
    ("Der Nutzer ist Veganer", "Der Nutzer ist Vegetarier und wohnt in Köln."),
    ("L'utilisateur joue du piano", "L'utilisateur joue du basson depuis 2024."),
    ("User has two dogs, Rex and Tofu", "Sam has two cats, Miso and Tofu, and a garden."),
    ("User prefers long detailed answers", "Sam prefers short answers and dislikes emojis."),
    ("User was born in 1985", "Sam was born in 1990 in Porto."),
    ("User's brother is called Luis", "Sam's sister is called Ana and lives in Lima."),
    ("User visited Lima in 2023 with Ana", "Sam's sister is called Ana and lives in Lima."),
    ("", PROFILE),
    ("the user", PROFILE),
]


def test_a_fact_is_held_by_a_profile_that_rewords_it_and_not_by_look_alikes() -> None:
    held = [m for m, p in HELD if injection.covered_by(m, injection.content_words(p))]
    missed = [m for m, p in NOT_HELD if injection.covered_by(m, injection.content_words(p))]
    assert (len(HELD), len(held)) == (20, 20)
    assert (len(NOT_HELD), missed) == (20, [])


def test_the_profile_keeps_whole_leading_sentences_within_its_budget() -> None:
    assert estimate_tokens(PROFILE) == 40
    assert injection.fit_profile(PROFILE, budget_tokens=40) == PROFILE
    assert injection.fit_profile(PROFILE, budget_tokens=30) == (
        "Pat is vegetarian and lives in Valencia. Pat owns a beagle called Pepper."
    )
    # a first sentence longer than the budget is cut at a word
    assert injection.fit_profile(PROFILE, budget_tokens=6) == "Pat is vegetarian…"
    assert injection.fit_profile(PROFILE, budget_tokens=0) is None
    assert injection.fit_profile("  ", budget_tokens=100) is None


def test_items_held_by_the_profile_or_repeating_an_item_are_left_out() -> None:
    relevant = [
        _ranked(1, "User owns a beagle named Pepper"),  # in the profile
        _ranked(2, "User's beagle Pepper is afraid of storms"),
        _ranked(3, "user's BEAGLE pepper is afraid of storms."),  # the same fact again
        _ranked(4, "User is learning the bassoon"),  # in the profile, not in the part kept
    ]
    block = injection.compose(
        profile=PROFILE, core=[], relevant=relevant, budget_tokens=50, max_items=10
    )
    # 25 of the 50 tokens for the profile: its first two sentences (21 tokens)
    assert (
        block.profile == "Pat is vegetarian and lives in Valencia. Pat owns a beagle called Pepper."
    )
    assert [i.memory.seq for i in block.items] == [2, 4]
    assert (block.core, block.dropped_repeats) == ([], 2)
    spent = estimate_tokens(block.profile) + sum(
        estimate_tokens(f"- [2026-06-01] {i.memory.content}") for i in block.items
    )
    assert spent == 50


def test_core_memories_take_what_the_items_leave_and_never_repeat_one() -> None:
    core = [
        _memory(10, "User is vegetarian"),
        _memory(11, "User owns a beagle named Pepper"),
        _memory(12, "User works nights"),
    ]
    relevant = [RankedMemory(core[1], 0.9, 0.9), _ranked(2, "User likes spicy food")]
    block = injection.compose(
        profile=None, core=core, relevant=relevant, budget_tokens=60, max_items=10
    )
    # the beagle is a relevant item, so not a core memory too; 20 of 60 tokens for core
    assert [i.memory.seq for i in block.items] == [11, 2]
    assert [c.memory.seq for c in block.core] == [10, 12]
    full = [_ranked(20 + i, f"User visited museum number {i} in Lima") for i in range(8)]
    crowded = injection.compose(
        profile=None, core=core, relevant=full, budget_tokens=60, max_items=10
    )
    assert [i.memory.seq for i in crowded.items] == [20, 21, 22, 23]
    assert crowded.core == []  # the items used the budget


@pytest.mark.parametrize("budget", [0, 1])
def test_nothing_fits_a_tiny_budget(budget: int) -> None:
    block = injection.compose(
        profile=PROFILE,
        core=[],
        relevant=[_ranked(1, "User keeps bees")],
        budget_tokens=budget,
        max_items=10,
    )
    assert (block.profile, block.items) == (None, [])
