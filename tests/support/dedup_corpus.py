"""A corpus for the near-duplicate guard (DESIGN §5.4): pairs (stored fact, proposed fact).

`SAME` are restatements that must merge into the stored fact: exact repeats, case and
punctuation changes, and the rewordings an LLM writes when a user says a fact again.
`DIFFERENT` are look-alikes that must stay separate facts: they differ from the stored fact
in a number, a date, a name or a negation, often by a single character.
"""

from __future__ import annotations

SAME: list[tuple[str, str]] = [
    ("User lives in Berlin", "User lives in Berlin."),
    ("User lives in Berlin", "The user lives in Berlin"),
    ("User has a sister named Jane", "User has a sister called Jane"),
    ("User has a sister named Jane", "The user has a sister named Jane."),
    ("User works as a nurse", "The user works as a nurse"),
    ("User is allergic to peanuts", "User has a peanut allergy"),
    ("User is allergic to peanuts", "The user is allergic to peanuts."),
    ("User prefers dark mode in editors", "User prefers dark mode in code editors"),
    ("User drinks coffee every morning", "User drinks a coffee every morning"),
    ("User has a dog named Rex", "User owns a dog named Rex"),
    ("User has a dog named Rex", "User has a dog called Rex"),
    ("User is vegetarian", "The user is a vegetarian"),
    ("User likes hiking in the mountains", "User enjoys hiking in the mountains"),
    ("User was born in 1988", "User was born in the year 1988"),
    ("User's birthday is on 14 March", "User's birthday is on March 14"),
    ("User speaks French and German", "User speaks German and French"),
    ("User is learning Japanese", "User is currently learning Japanese"),
    ("User's favourite colour is green", "User's favorite color is green"),
    ("User plays the guitar", "User plays guitar"),
    ("User has two children", "User has 2 children"),
    ("User runs 5 km every Sunday", "User runs 5 km each Sunday"),
    ("User prefers short answers", "User prefers short, concise answers"),
    ("User wants answers in bullet points", "User wants the answers in bullet points"),
    ("User's partner is named Sam", "User's partner's name is Sam"),
    ("User is a software engineer", "User works as a software engineer"),
    ("User does not eat meat", "User doesn't eat meat"),
    ("User never drinks alcohol", "User never drinks any alcohol"),
    ("User moved to Lisbon in 2021", "User moved to Lisbon in 2021."),
    ("User's project uses PostgreSQL 16", "The user's project uses PostgreSQL 16"),
    ("User is training for a marathon", "User is training for a marathon race"),
    ("User has a cat named Miso", "User has a cat called Miso"),
    ("User commutes by bike", "User commutes to work by bike"),
    ("User's daughter Mia is 7 years old", "User's daughter Mia is 7"),
    ("User likes jazz music", "User likes jazz"),
    ("User is married to Alex", "User is married to Alex."),
    ("USER LIVES IN BERLIN", "user lives in berlin"),
    ("User works remotely from home", "User works from home remotely"),
    ("User's team deploys on Fridays", "The user's team deploys on Fridays"),
    ("User is afraid of flying", "User has a fear of flying"),
    ("User reads science fiction books", "User reads science-fiction books"),
    ("User wohnt in Berlin", "User wohnt in Berlin."),
    ("User aime le café noir", "User aime le café noir."),
]

DIFFERENT: list[tuple[str, str]] = [
    # a number
    ("User has two children", "User has three children"),
    ("User has 2 children", "User has 3 children"),
    ("User runs 5 km every Sunday", "User runs 6 km every Sunday"),
    ("User's daughter Mia is 7 years old", "User's daughter Mia is 8 years old"),
    ("User was born in 1988", "User was born in 1989"),
    ("User's project uses PostgreSQL 16", "User's project uses PostgreSQL 15"),
    ("User's flat is on the 4th floor", "User's flat is on the 5th floor"),
    ("User sleeps 7 hours a night", "User sleeps 8 hours a night"),
    ("User's PIN-free locker number is 112", "User's PIN-free locker number is 113"),
    ("User's budget is 1500 euros", "User's budget is 1600 euros"),
    ("User weighs 70 kg", "User weighs 75 kg"),
    ("User has one brother", "User has two brothers"),
    # a date
    ("User's birthday is on 14 March", "User's birthday is on 15 March"),
    ("User's birthday is on 14 March", "User's birthday is on 14 May"),
    ("User moved to Lisbon in 2021", "User moved to Lisbon in 2022"),
    ("User's wedding is on 2026-06-12", "User's wedding is on 2026-06-13"),
    ("User has a dentist appointment on Monday", "User has a dentist appointment on Tuesday"),
    ("User's exam is on 3 July 2026", "User's exam is on 3 June 2026"),
    ("User started the job in January", "User started the job in February"),
    ("User's lease ends on 2027-01-31", "User's lease ends on 2027-01-30"),
    ("User's flight leaves on Friday", "User's flight leaves on Saturday"),
    ("User visits parents every December", "User visits parents every November"),
    # a name
    ("User has a sister named Jane", "User has a sister named Jana"),
    ("User has a dog named Rex", "User has a dog named Max"),
    ("User lives in Berlin", "User lives in Bern"),
    ("User is married to Alex", "User is married to Alec"),
    ("User's partner is named Sam", "User's partner is named Pam"),
    ("User works at Siemens", "User works at Siemans"),
    ("User's manager is Anna Schmidt", "User's manager is Anna Schmitt"),
    ("User's cat is called Miso", "User's cat is called Mika"),
    ("User is learning Japanese", "User is learning Javanese"),
    ("User's son goes to Hillside School", "User's son goes to Hilltop School"),
    ("User supports FC Porto", "User supports FC Basel"),
    ("User's project is named Orion", "User's project is named Orian"),
    # a negation
    ("User eats meat", "User does not eat meat"),
    ("User likes spicy food", "User doesn't like spicy food"),
    ("User drinks alcohol", "User never drinks alcohol"),
    ("User is a vegetarian", "User is not a vegetarian"),
    ("User wants answers in bullet points", "User does not want answers in bullet points"),
    ("User has a car", "User has no car"),
    ("User is allergic to peanuts", "User is not allergic to peanuts"),
    ("User smokes", "User no longer smokes"),
    ("User enjoys working late", "User does not enjoy working late"),
    ("User can swim", "User cannot swim"),
    ("User wohnt in Berlin", "User wohnt nicht in Berlin"),
    ("User aime le café", "User n'aime pas le café"),
]

OTHER_WORD: list[tuple[str, str]] = [
    # look-alikes that differ in an ordinary word (not a number, date, name or negation):
    # the guard does not look at these words, so similarity alone must keep them apart
    ("User likes tea", "User likes coffee"),
    ("User has a dog", "User has a cat"),
    ("User works as a nurse", "User works as a doctor"),
    ("User prefers dark mode in editors", "User prefers light mode in editors"),
    ("User plays the guitar", "User plays the piano"),
    ("User likes jazz music", "User likes rock music"),
    ("User loves cats", "User hates cats"),
    ("User likes spicy food", "User dislikes spicy food"),
    ("User prefers short answers", "User prefers long answers"),
    ("User drinks coffee every morning", "User drinks tea every morning"),
    ("User commutes by bike", "User commutes by car"),
    ("User's daughter is a teacher", "User's son is a teacher"),
    ("User wants answers in bullet points", "User wants answers in prose"),
    ("User is training for a marathon", "User is training for a triathlon"),
    ("User reads science fiction books", "User reads fantasy books"),
    ("User has a younger sister", "User has an older sister"),
    ("User's favourite colour is green", "User's favourite colour is blue"),
    ("User prefers Python", "User prefers Rust"),
]


REWORDED: list[tuple[str, str]] = [
    # (forgotten, said again in other words): sentences restructured around the same content
    # words, as a user says a fact again; the forget guard must recognise them
    # (service/core/forget_guard.py, MEANING_COSINE). The last two trade a content word for
    # a synonym ("lives" → "home", "works" → "job"): counted, not recognised.
    ("User has a dog named Rex", "Rex is the user's dog"),
    ("User has a dog named Rex", "The user's dog is called Rex"),
    ("User has a dog named Rex", "User is the owner of a dog, Rex"),
    ("User has a dog named Rex", "The user owns Rex, a dog"),
    ("User has a dog named Rex", "User's pet dog goes by the name Rex"),
    ("User lives in Berlin", "Berlin is where the user lives"),
    ("User is allergic to peanuts", "Peanuts give the user an allergic reaction"),
    (
        "User's sister Hanna moved to Lisbon in 2021",
        "In 2021 Hanna, the user's sister, moved to Lisbon",
    ),
    ("User lives in Berlin", "User's home is in Berlin"),
    ("User works as a nurse", "User's job is nursing"),
]
