"""Full-text matches: English stems, names and ids as written, other languages."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.core.records import Bank, OwnerKind, ReadScope, Scope, SourceKind
from service.storage import memories, memory_search
from service.storage.db import Database

FACTS = [
    "User rides a cargo bike to work",
    "Jonas' Lieblingsgericht sind Käsespätzle 🧀",
    "User's locker code id is ZX-9912",
    "User likes the running club",
]


@pytest.fixture
async def db(database_url: str):  # type: ignore[no-untyped-def]
    database = Database.connect(database_url)
    async with database.unit_of_work() as session:
        for fact in FACTS:
            await memories.insert(
                session,
                owner_kind=OwnerKind.USER,
                owner_id="kw",
                bank=Bank.PERSONAL,
                content=fact,
                tags=[],
                confidence=1.0,
                source_kind=SourceKind.MANUAL,
                source_chat_id=None,
                source_message_id=None,
                created_at=datetime.now(UTC),
                embedding=None,
                embedding_model=None,
            )
    yield database
    await database.dispose()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("bike", [FACTS[0]]),
        ("bikes", [FACTS[0]]),
        ("Käsespätzle", [FACTS[1]]),
        ("ZX-9912", [FACTS[2]]),
        ("runs", [FACTS[3]]),
        ("the a of", []),
        ("", []),
        ("'); DROP TABLE memories; --", []),
    ],
)
async def test_keyword_search_matches_words_stems_ids_and_other_languages(
    db: Database, query: str, expected: list[str]
) -> None:
    scope = ReadScope((Scope(OwnerKind.USER, "kw", Bank.PERSONAL),))
    async with db.unit_of_work() as session:
        found = await memory_search.keyword_search(session, scope=scope, text=query, limit=5)
    assert [c.memory.content for c in found] == expected


async def test_keyword_search_stays_inside_the_scope(db: Database) -> None:
    scope = ReadScope((Scope(OwnerKind.USER, "someone-else", Bank.PERSONAL),))
    async with db.unit_of_work() as session:
        assert await memory_search.keyword_search(session, scope=scope, text="bike", limit=5) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cargo bike; running club", [FACTS[0], FACTS[3]]),
        ("bike cargo", []),  # a phrase keeps its word order
        ('ZX-9912; "quoted" & | ! ( ) :* \'', [FACTS[2]]),
        (";;; ;", []),
        ("; ".join(["nothing"] * 100) + "; Käsespätzle", []),  # phrases past the 60th are ignored
    ],
)
async def test_phrase_search_ors_phrases_and_never_fails_on_odd_characters(
    db: Database, text: str, expected: list[str]
) -> None:
    scope = ReadScope((Scope(OwnerKind.USER, "kw", Bank.PERSONAL),))
    async with db.unit_of_work() as session:
        found = await memory_search.phrase_search(
            session, scope=scope, phrases=memory_search.split_phrases(text), limit=10
        )
    assert sorted(c.memory.content for c in found) == sorted(expected)


def test_search_api_takes_phrases(service) -> None:  # type: ignore[no-untyped-def]
    for fact in FACTS:
        service.client.post("/v1/users/kw/memories", json={"content": fact})
    answer = service.client.get(
        "/v1/users/kw/memories/search", params={"q": "running club; cargo bike"}
    )
    assert answer.status_code == 200
    assert sorted(m["content"] for m in answer.json()["items"]) == sorted([FACTS[0], FACTS[3]])
    assert service.client.get(
        "/v1/users/kw/memories/search", params={"q": "\"'();:*&|!"}
    ).json() == {"items": [], "total": 0}
