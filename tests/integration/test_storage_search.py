"""Exact per-owner vector search and the scope filter, on the real PostgreSQL + pgvector."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text as sa_text

from service.core.records import Bank, OwnerKind, ReadScope, Scope, SourceKind
from service.storage import hybrid_search, memories, memory_search
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
        top = await memory_search.search(session, scope=scope, query_vector=query, limit=50)
        small = await memory_search.search(
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
            await memory_search.search(
                session, scope=ReadScope(), query_vector=_unit(rng), limit=50
            )
            == []
        )
        assert (
            await memory_search.search(
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
        found = await memory_search.search(session, scope=scope, query_vector=_unit(rng), limit=50)
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
        matrix = await memory_search.pairwise_similarity(session, seqs=order)
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


async def test_candidates_are_the_nearest_and_the_best_by_okapi_bm25_over_the_scope(
    db: Database,
) -> None:
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
        both = await hybrid_search.candidates(
            session, scope=scope, query_vector=query, text=text, limit=30
        )
        semantic = await memory_search.search(session, scope=scope, query_vector=query, limit=30)
        keyword = await memory_search.keyword_search(
            session, scope=scope, text=text, limit=30, query_vector=query
        )
        vector_only = await hybrid_search.candidates(
            session, scope=scope, query_vector=query, text="  ", limit=30
        )
        lexemes = (
            await session.execute(
                sa_text(
                    "SELECT seq, length(tsv), lexeme, array_length(positions, 1) "
                    "FROM memories, unnest(tsv) WHERE owner_id = 'hana' AND status = 'active'"
                )
            )
        ).all()
    # the same nearest memories, each also carrying its BM25 score when it matched a word
    assert [(c.memory, c.similarity) for c in both.semantic] == [
        (c.memory, c.similarity) for c in semantic
    ]
    expected = _okapi_bm25(lexemes, terms={"bike", "bikes", "kyoto"}, k1=0.9, b=0.4)
    best = sorted(expected, key=lambda seq: (-expected[seq], seq))[:30]
    assert [c.memory.seq for c in both.keyword] == best
    assert [c.text_rank for c in both.keyword] == pytest.approx([expected[s] for s in best])
    assert [c.text_rank for c in both.semantic] == pytest.approx(
        [expected.get(c.memory.seq) for c in semantic]
    )
    # ts_rank (the /memory search ranking) finds the same rows that match, ranked otherwise
    assert {c.memory.seq for c in keyword} <= set(expected)
    assert len(expected) == 54  # of hana's 160 memories, 54 name bikes or Kyoto
    assert {c.memory.owner_id for c in both.keyword} == {"hana"}
    assert both.exact_fallbacks == 0
    assert vector_only.semantic == semantic and vector_only.keyword == []


def _okapi_bm25(rows: Sequence[Any], *, terms: set[str], k1: float, b: float) -> dict[int, float]:
    """Okapi BM25 by hand over (seq, distinct lexemes, lexeme, positions) rows of a scope:
    N = the scope's rows, df = rows holding the term, avgdl over the rows that match."""
    length = {seq: dl for seq, dl, _, _ in rows}
    tf = {(seq, lex): n or 1 for seq, _, lex, n in rows if lex in terms}
    matched = {seq for seq, _ in tf}
    df = {t: sum(1 for seq, lex in tf if lex == t) for t in terms}
    avgdl = sum(length[s] for s in matched) / len(matched)
    scores: dict[int, float] = {}
    for (seq, lex), f in tf.items():
        idf = math.log(1 + (len(length) - df[lex] + 0.5) / (df[lex] + 0.5))
        norm = f + k1 * (1 - b + b * length[seq] / avgdl)
        scores[seq] = scores.get(seq, 0.0) + idf * f * (k1 + 1) / norm
    return scores
