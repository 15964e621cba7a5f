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


#: other languages, with words that hold an English pronoun's letters ("système", "Tôi",
#: "crème") or are spelled like one ("me" in Spanish, "i" and "my" in Polish): never rewritten
OTHER_LANGUAGES = [
    ("fr", "Le système de chauffage est en panne depuis même lundi"),
    ("fr", "Je m'appelle Marie et ce thème me plaît"),
    ("de", "Ich träume von Bäumen, mein Gemüse wächst im Garten"),
    ("es", "Me gusta el café y me llamo Lucía"),
    ("pt", "Me chamo Ana e moro em São Paulo"),
    ("it", "Io e mia madre ce ne andiamo, me lo ha detto"),
    ("vi", "Tôi thích ăn phở và tôi sống ở Hà Nội"),
    ("tr", "Yeni bir iş buldum ve İzmir'de yaşıyorum"),  # noqa: RUF001 - Turkish dotless i
    ("pl", "Mam psa i kota, my mieszkamy w Krakowie"),
    ("ru", "Меня зовут Иван, я живу в Москве"),
    ("ja", "私は東京に住んでいます"),
    ("zh", "我住在北京，我喜欢喝茶"),  # noqa: RUF001 - a Chinese comma
    ("ar", "اسمي أحمد وأعيش في القاهرة"),
    ("nl", "Ik ben Sam en mijn hond is bruin"),
    ("ro", "Eu sunt din Cluj și îmi place muzica"),
]
#: English with words of other languages inside: rewritten, the foreign words kept whole
ENGLISH_WITH_FOREIGN_WORDS = [
    ("I love crème brûlée", "User loves crème brûlée"),
    ("I live in Zürich", "User lives in Zürich"),
    ("My café is in Besançon", "User's café is in Besançon"),
    ("I drink phở on Sundays at Tôi Café", "User drinks phở on Sundays at Tôi Café"),
    ("I love the Café de Flore", "User loves the Café de Flore"),
]


@pytest.mark.parametrize(("language", "typed"), OTHER_LANGUAGES)
def test_other_languages_are_stored_as_typed(language: str, typed: str) -> None:
    assert third_person(typed) == typed, language


def test_the_other_languages_are_at_least_ten() -> None:
    assert len({language for language, _ in OTHER_LANGUAGES}) >= 10


@pytest.mark.parametrize(("typed", "stored"), ENGLISH_WITH_FOREIGN_WORDS)
def test_foreign_words_in_english_are_never_cut(typed: str, stored: str) -> None:
    assert third_person(typed) == stored


@pytest.mark.parametrize(
    "typed",
    [t for t, _ in REWRITTEN]
    + QUOTED
    + UNCHANGED
    + [t for _, t in OTHER_LANGUAGES]
    + [t for t, _ in ENGLISH_WITH_FOREIGN_WORDS],
)
def test_rewriting_twice_changes_nothing_more(typed: str) -> None:
    """An import preview's text is guarded again when confirmed: never quoted twice."""
    once = third_person(typed)
    assert third_person(once) == once
