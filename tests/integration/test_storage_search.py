"""Exact per-owner vector search and the scope filter, on the real PostgreSQL + pgvector."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from service.core.records import Bank, OwnerKind, ReadScope, Scope, SourceKind
from service.storage import memories
from service.storage.db import Database


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=384).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
async def db(database_url: str):  # type: ignore[no-untyped-def]
    database = Database.connect(database_url)
    yield database
    await database.dispose()


async def _seed(
    db: Database, *, owner: str, n: int, rng: np.random.Generator, bank: Bank = Bank.PERSONAL
) -> None:
    async with db.unit_of_work() as session:
        for i in range(n):
            await memories.insert(
                session,
                owner_kind=OwnerKind.USER,
                owner_id=owner,
                bank=bank,
                content=f"{owner} fact {i}",
                tags=[],
                confidence=0.9,
                source_kind=SourceKind.MANUAL,
                source_chat_id=None,
                source_message_id=None,
                created_at=datetime.now(UTC),
                embedding=_unit(rng),
                embedding_model="test",
            )


async def test_search_returns_min_of_limit_and_owner_rows_exactly(db: Database) -> None:
    rng = np.random.default_rng(7)
    await _seed(db, owner="alice", n=120, rng=rng)
    await _seed(db, owner="bob", n=300, rng=rng)
    scope = ReadScope((Scope(OwnerKind.USER, "alice", Bank.PERSONAL),))
    query = _unit(rng)
    async with db.unit_of_work() as session:
        top = await memories.search(session, scope=scope, query_vector=query, limit=50)
        small = await memories.search(
            session,
            scope=ReadScope((Scope(OwnerKind.USER, "alice", Bank.PERSONAL),)),
            query_vector=query,
            limit=500,
        )
    assert len(top) == 50
    assert len(small) == 120
    assert {c.memory.owner_id for c in small} == {"alice"}
    # exact: the 50 returned are the 50 best of all 120 by cosine
    best = sorted(small, key=lambda c: -c.cosine)[:50]
    assert [c.memory.id for c in top] == [c.memory.id for c in best]
    assert top[0].similarity == pytest.approx(1 - (1 - top[0].cosine) / 2, abs=1e-6)


async def test_empty_scope_and_empty_store_return_nothing(db: Database) -> None:
    rng = np.random.default_rng(1)
    async with db.unit_of_work() as session:
        assert (
            await memories.search(session, scope=ReadScope(), query_vector=_unit(rng), limit=50)
            == []
        )
        assert (
            await memories.search(
                session,
                scope=ReadScope((Scope(OwnerKind.USER, "nobody", Bank.PERSONAL),)),
                query_vector=_unit(rng),
                limit=50,
            )
            == []
        )


async def test_scope_filter_separates_banks_of_one_owner(db: Database) -> None:
    rng = np.random.default_rng(3)
    await _seed(db, owner="carol", n=5, rng=rng, bank=Bank.PERSONAL)
    await _seed(db, owner="carol", n=4, rng=rng, bank=Bank.INTERACTION)
    scope = ReadScope((Scope(OwnerKind.USER, "carol", Bank.INTERACTION),))
    async with db.unit_of_work() as session:
        found = await memories.search(session, scope=scope, query_vector=_unit(rng), limit=50)
    assert len(found) == 4
    assert {c.memory.bank for c in found} == {Bank.INTERACTION}


async def test_pairwise_similarity_is_the_cosine_of_the_stored_vectors(db: Database) -> None:
    rng = np.random.default_rng(11)
    vectors = [_unit(rng) for _ in range(6)]
    async with db.unit_of_work() as session:
        stored = [
            await memories.insert(
                session,
                owner_kind=OwnerKind.USER,
                owner_id="erin",
                bank=Bank.PERSONAL,
                content=f"fact {i}",
                tags=[],
                confidence=0.9,
                source_kind=SourceKind.MANUAL,
                source_chat_id=None,
                source_message_id=None,
                created_at=datetime.now(UTC),
                embedding=None if i == 4 else v,
                embedding_model=None if i == 4 else "test",
            )
            for i, v in enumerate(vectors)
        ]
        # any order of seqs; the fifth memory has no vector yet
        order = [stored[i].seq for i in (3, 0, 5, 4, 1, 2)]
        matrix = await memories.pairwise_similarity(session, seqs=order)
    expected = np.array(
        [[float(vectors[a] @ vectors[b]) for b in (3, 0, 5, 4, 1, 2)] for a in (3, 0, 5, 4, 1, 2)]
    )
    expected[3, :] = expected[:, 3] = 0.0
    np.fill_diagonal(expected, 1.0)
    assert matrix.shape == (6, 6)
    np.testing.assert_allclose(matrix, expected, atol=1e-6)


async def test_core_memories_are_the_most_confident_then_newest_across_banks(db: Database) -> None:
    rng = np.random.default_rng(5)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    rows = []
    async with db.unit_of_work() as session:
        for i in range(30):
            bank = (Bank.PERSONAL, Bank.INTERACTION)[i % 2]
            rows.append(
                await memories.insert(
                    session,
                    owner_kind=OwnerKind.USER,
                    owner_id="fay",
                    bank=bank,
                    content=f"fact {i}",
                    tags=[],
                    confidence=(0.6, 0.9, 0.75)[i % 3],
                    source_kind=SourceKind.MANUAL,
                    source_chat_id=None,
                    source_message_id=None,
                    created_at=start + timedelta(days=i % 7),
                    embedding=_unit(rng),
                    embedding_model="test",
                )
            )
        scope = ReadScope(
            (
                Scope(OwnerKind.USER, "fay", Bank.PERSONAL),
                Scope(OwnerKind.USER, "fay", Bank.INTERACTION),
                Scope(OwnerKind.USER, "gus", Bank.PERSONAL),
            )
        )
        core = await memories.core_memories(session, scope=scope, limit=7)
    best = sorted(rows, key=lambda m: (-m.confidence, -m.created_at.timestamp(), -m.seq))[:7]
    assert [m.seq for m in core] == [m.seq for m in best]


async def test_candidates_of_one_statement_equal_search_and_keyword_search(db: Database) -> None:
    rng = np.random.default_rng(17)
    words = ("bikes", "Lisbon", "tea", "chess", "Kyoto", "violin")
    async with db.unit_of_work() as session:
        for owner, bank in (
            ("hana", Bank.PERSONAL),
            ("hana", Bank.INTERACTION),
            ("ivan", Bank.PERSONAL),
        ):
            for i in range(80):
                await memories.insert(
                    session,
                    owner_kind=OwnerKind.USER,
                    owner_id=owner,
                    bank=bank,
                    content=f"{owner} likes {words[i % 6]} and {words[(i * 7) % 6]} ({i})",
                    tags=[],
                    confidence=0.9,
                    source_kind=SourceKind.MANUAL,
                    source_chat_id=None,
                    source_message_id=None,
                    created_at=datetime.now(UTC),
                    embedding=None if i % 10 == 0 else _unit(rng),
                    embedding_model="test",
                )
    scope = ReadScope(
        (
            Scope(OwnerKind.USER, "hana", Bank.PERSONAL),
            Scope(OwnerKind.USER, "hana", Bank.INTERACTION),
        )
    )
    query, text = _unit(rng), "bikes in Kyoto?"
    async with db.unit_of_work() as session:
        both = await memories.candidates(
            session, scope=scope, query_vector=query, text=text, limit=30
        )
        semantic = await memories.search(session, scope=scope, query_vector=query, limit=30)
        keyword = await memories.keyword_search(
            session, scope=scope, text=text, limit=30, query_vector=query
        )
        vector_only = await memories.candidates(
            session, scope=scope, query_vector=query, text="  ", limit=30
        )
    assert both.semantic == semantic
    assert both.keyword == keyword
    assert len(keyword) == 30 and {c.memory.owner_id for c in keyword} == {"hana"}
    assert both.exact_fallbacks == 0
    assert vector_only.semantic == semantic and vector_only.keyword == []
