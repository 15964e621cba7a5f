"""`/memory add` in the first person is stored so it cannot read as the assistant's own."""

import pytest

from service.core.person import third_person

#: (typed, stored) — first-person memories users type, and what is stored
REWRITTEN = [
    ("I am allergic to penicillin", "User is allergic to penicillin"),
    ("I'm vegetarian", "User is vegetarian"),
    ("I\u2019m left-handed", "User is left-handed"),
    ("I keep bees", "User keeps bees"),
    ("I keep bees in my garden", "User keeps bees in their garden"),
    ("I have two cats", "User has two cats"),
    ("I've got a dog", "User has got a dog"),
    ("I live in Lyon", "User lives in Lyon"),
    ("I prefer short answers", "User prefers short answers"),
    ("I always drink tea in the morning", "User always drinks tea in the morning"),
    ("I never eat meat", "User never eats meat"),
    ("I go climbing on Sundays", "User goes climbing on Sundays"),
    ("I watch football", "User watches football"),
    ("I study law", "User studies law"),
    ("I don't drink coffee", "User doesn't drink coffee"),
    ("I do not drive", "User does not drive"),
    ("I didn't finish school", "User didn't finish school"),
    ("I can speak Spanish", "User can speak Spanish"),
    ("I will move to Berlin in May", "User will move to Berlin in May"),
    ("I'll retire next year", "User will retire next year"),
    ("I was born in 1990", "User was born in 1990"),
    ("I worked at a bakery", "User worked at a bakery"),
    ("I went to Japan last year", "User went to Japan last year"),
    ("My daughter is called Sam", "User's daughter is called Sam"),
    ("My favourite colour is green", "User's favourite colour is green"),
    ("Call me Sam", "Call the user Sam"),
    ("The red bike is mine", "The red bike is the user's"),
    ("I taught myself Python", "User taught themselves Python"),
    ("I run; my knee hurts", "User runs; User's knee hurts"),
    ("Allergic to nuts, I carry an EpiPen", "Allergic to nuts, the user carries an EpiPen"),
]
#: first-person text without a sure rewrite: quoted, so still said by the user
QUOTED = [
    "We moved to Lyon",
    "Our son plays the violin",
    "I'd like shorter answers",
    "Remind us about the rent",
    "I, for one, hate olives",
    "I the undersigned agree",
]
#: no first-person word: stored exactly as typed
UNCHANGED = [
    "User keeps bees",
    "Prefers answers as short lists",
    "Iceland trip in June",
    "Mike is the user's brother",
    "Idle servers are shut down at night",
    "The IT team meets on Mondays",
    "Allergic to penicillin",
    "  spaces kept  ",
]


@pytest.mark.parametrize(("typed", "stored"), REWRITTEN)
def test_first_person_memories_are_stored_in_the_third_person(typed: str, stored: str) -> None:
    assert third_person(typed) == stored


@pytest.mark.parametrize("typed", QUOTED)
def test_first_person_text_without_a_sure_rewrite_is_quoted_as_the_users(typed: str) -> None:
    assert third_person(typed) == f"User said: “{typed}”"


@pytest.mark.parametrize("typed", UNCHANGED)
def test_text_without_a_first_person_word_is_stored_as_typed(typed: str) -> None:
    assert third_person(typed) == typed


def test_the_corpus_counts() -> None:
    """30 rewrites, 6 quotes, 8 look-alikes: none of the 44 keeps a first-person "I"."""
    results = [third_person(t) for t, _ in REWRITTEN] + [third_person(t) for t in UNCHANGED]
    assert (len(REWRITTEN), len(QUOTED), len(UNCHANGED)) == (30, 6, 8)
    assert sum(" I " in f" {r} " or r.startswith("My ") for r in results) == 0
