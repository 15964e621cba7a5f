"""The full-text postings and bank statistics (migration 0014) stay exactly what the active
memories give, whatever writes them: inserts, forgets, archives and restores, edits of text or
bank, supersedes, a user's deletion, TRUNCATE, bulk loads, and writers that interleave."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import numpy as np
import psycopg
import pytest
from sqlalchemy import text as sa_text

from service.core.records import Bank, OwnerKind, ReadScope, Scope, SourceKind, Status
from service.storage import hybrid_search, memories, term_stats
from service.storage.db import Database

CELLS = (("ana", Bank.PERSONAL), ("ana", Bank.INTERACTION), ("ben", Bank.PERSONAL))
WORDS = ("bikes", "Lisbon", "tea", "chess", "Kyoto", "violin", "running", "the", "garden")


@pytest.fixture
async def db(database_url: str):  # type: ignore[no-untyped-def]
    database = Database.connect(database_url)
    yield database
    await database.dispose()


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=384).astype(np.float32)
    return v / np.linalg.norm(v)


async def _add(session, owner: str, bank: Bank, content: str, rng) -> uuid.UUID:  # type: ignore[no-untyped-def]
    memory = await memories.insert(
        session,
        owner_kind=OwnerKind.USER,
        owner_id=owner,
        bank=bank,
        content=content,
        tags=[],
        confidence=0.9,
        source_kind=SourceKind.MANUAL,
        source_chat_id=None,
        source_message_id=None,
        created_at=datetime.now(UTC),
        embedding=_unit(rng),
        embedding_model="test",
    )
    return memory.id


async def _assert_exact(db: Database) -> tuple[int, int]:
    """Stored statistics == a recomputation from the memories; returns (cells, postings)."""
    async with db.unit_of_work() as session:
        cells, expected_cells = (
            await term_stats.stored_cells(session),
            await term_stats.expected_cells(session),
        )
        postings, expected_postings = (
            await term_stats.stored_postings(session),
            await term_stats.expected_postings(session),
        )
    assert cells == expected_cells
    assert postings == expected_postings
    return len(cells), len(postings)


async def test_statistics_equal_a_recomputation_after_every_kind_of_write(db: Database) -> None:
    rng = np.random.default_rng(3)
    now = datetime.now(UTC)
    ids: list[uuid.UUID] = []
    async with db.unit_of_work() as session:
        for i in range(30):
            owner, bank = (
                ("ana", Bank.PERSONAL),
                ("ana", Bank.INTERACTION),
                ("ben", Bank.PERSONAL),
            )[i % 3]
            text = f"{owner} likes {WORDS[i % 9]} and {WORDS[(i * 4) % 9]} {WORDS[i % 9]} ({i})"
            ids.append(await _add(session, owner, bank, text, rng))
    assert await _assert_exact(db) == (3, (await _postings_count(db)))
    async with db.unit_of_work() as session:
        # forget, archive, restore, a forget of a forgotten one (no change), supersede
        assert await memories.set_status(session, memory_id=ids[0], status=Status.DELETED, at=now)
        assert await memories.set_status(session, memory_id=ids[1], status=Status.ARCHIVED, at=now)
        assert await memories.set_status(session, memory_id=ids[2], status=Status.ARCHIVED, at=now)
        assert await memories.set_status(session, memory_id=ids[2], status=Status.ACTIVE, at=now)
        assert not await memories.set_status(
            session, memory_id=ids[0], status=Status.ACTIVE, at=now
        )
        successor = await _add(session, "ana", Bank.PERSONAL, "ana likes green tea now", rng)
        assert await memories.supersede(session, memory_id=ids[3], successor_id=successor, at=now)
    await _assert_exact(db)
    async with db.unit_of_work() as session:
        # edits: new text, another bank, both; an edit of an archived memory counts nothing
        await memories.update_fields(session, memory_id=ids[4], at=now, content="ana rows boats")
        await memories.update_fields(session, memory_id=ids[5], at=now, bank=Bank.PERSONAL)
        await memories.update_fields(
            session, memory_id=ids[6], at=now, content="ben bakes bread", bank=Bank.INTERACTION
        )
        await memories.update_fields(session, memory_id=ids[1], at=now, content="ana sails")
        # the read path's bookkeeping touches no statistics
        await session.execute(
            sa_text("UPDATE memories SET last_used_at = now() WHERE owner_id = 'ana'")
        )
    await _assert_exact(db)
    async with db.unit_of_work() as session:
        # a user's deletion: every row of ben deleted in one statement
        await session.execute(sa_text("DELETE FROM memories WHERE owner_id = 'ben'"))
    cells, postings = await _assert_exact(db)
    assert cells == 2  # ben's banks are gone, ana's two remain
    assert postings == await _postings_count(db)
    async with db.unit_of_work() as session:
        await session.execute(sa_text("TRUNCATE memories"))
    assert await _assert_exact(db) == (0, 0)


async def _postings_count(db: Database) -> int:
    async with db.unit_of_work() as session:
        return len(await term_stats.expected_postings(session))


async def test_rebuild_restores_statistics_after_a_load_without_triggers(
    db: Database, database_url: str
) -> None:
    rng = np.random.default_rng(5)
    async with db.unit_of_work() as session:
        for i in range(12):
            await _add(session, "cleo", Bank.PERSONAL, f"cleo plays {WORDS[i % 9]} ({i})", rng)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # a bulk load: no triggers
        conn.execute("UPDATE memories SET content = content || ' again', status = 'active'")
        conn.execute("DELETE FROM memories WHERE content LIKE '%(3) again'")
    async with db.unit_of_work() as session:
        assert await term_stats.stored_cells(session) != await term_stats.expected_cells(session)
        cells, postings = await term_stats.rebuild(session)
    assert (cells, postings) == await _assert_exact(db)
    assert cells == 1


async def test_interleaved_writers_and_folds_of_one_bank_keep_exact_statistics(
    db: Database,
) -> None:
    """Writer A holds its transaction open after an insert and a forget (the pausable
    stand-in); meanwhile writer B writes the same bank and commits without waiting for A,
    a fold runs, and readers see exactly the committed state; A then commits: all exact."""
    rng = np.random.default_rng(9)
    async with db.unit_of_work() as session:
        first = [
            await _add(session, "dora", Bank.PERSONAL, f"dora likes tea ({i})", rng)
            for i in range(6)
        ]
    scope = ReadScope((Scope(OwnerKind.USER, "dora", Bank.PERSONAL),))
    release, a_wrote = asyncio.Event(), asyncio.Event()
    a_ids: list[uuid.UUID] = []
    now = datetime.now(UTC)

    async def writer_a() -> None:
        async with db.unit_of_work() as session:
            a_ids.append(await _add(session, "dora", Bank.PERSONAL, "dora likes chess, tea", rng))
            await memories.set_status(session, memory_id=first[0], status=Status.DELETED, at=now)
            a_wrote.set()
            await release.wait()

    task_a = asyncio.create_task(writer_a())
    await asyncio.wait_for(a_wrote.wait(), timeout=60)
    async with db.unit_of_work() as session:  # writer B: the same bank, committed first
        b_id = await _add(session, "dora", Bank.PERSONAL, "dora likes tea in Kyoto", rng)
        await memories.set_status(session, memory_id=first[1], status=Status.ARCHIVED, at=now)
    async with db.unit_of_work() as session:
        assert await term_stats.fold(session) == 1  # the first inserts' rows and B's, summed
    assert not task_a.done()
    await _assert_exact(db)  # the committed state, without A's writes
    assert set(await _bm25_of(db, scope)) == {first[0], *first[2:], b_id}
    release.set()
    await asyncio.wait_for(task_a, timeout=60)
    await _assert_exact(db)
    async with db.unit_of_work() as session:
        (cell,) = await term_stats.stored_cells(session)
        assert await term_stats.fold(session) == 1  # the folded row and A's
        assert await term_stats.fold(session) == 0  # one row per bank already
    assert cell[:4] == ("user", "dora", "personal", 6)  # 6 + 2 new − forgotten − archived
    await _assert_exact(db)
    assert set(await _bm25_of(db, scope)) == {*first[2:], b_id, *a_ids}


async def test_a_writer_holding_a_memory_lock_and_one_writing_the_bank_do_not_deadlock(
    db: Database,
) -> None:
    """T2 locks a memory row; T1 writes the bank, then waits for that row; T2 then writes the
    bank and commits; T1 goes on. (A counter row updated in place would deadlock here.)"""
    rng = np.random.default_rng(11)
    async with db.unit_of_work() as session:
        target = await _add(session, "eli", Bank.PERSONAL, "eli likes tea", rng)
    t2_locked, t1_wrote = asyncio.Event(), asyncio.Event()

    async def t2() -> None:
        async with db.unit_of_work() as session:
            await memories.lock_rows(session, memory_ids=[target])
            t2_locked.set()
            await asyncio.wait_for(t1_wrote.wait(), timeout=60)
            await _add(session, "eli", Bank.PERSONAL, "eli likes chess", rng)

    async def t1() -> None:
        await asyncio.wait_for(t2_locked.wait(), timeout=60)
        async with db.unit_of_work() as session:
            await _add(session, "eli", Bank.PERSONAL, "eli likes Kyoto", rng)
            t1_wrote.set()
            await memories.lock_rows(session, memory_ids=[target])  # waits for T2's commit
            await memories.set_status(
                session, memory_id=target, status=Status.ARCHIVED, at=datetime.now(UTC)
            )

    await asyncio.wait_for(asyncio.gather(t1(), t2()), timeout=120)
    cells, _ = await _assert_exact(db)
    async with db.unit_of_work() as session:
        (cell,) = await term_stats.stored_cells(session)
    assert cells == 1 and cell[3] == 2  # 1 + 2 new − 1 archived


async def _bm25_of(db: Database, scope: ReadScope) -> dict[uuid.UUID, float]:
    """id → BM25 of the full-text candidates for "tea" (every memory of dora matches)."""
    async with db.unit_of_work() as session:
        found = await hybrid_search.candidates(
            session,
            scope=scope,
            query_vector=_unit(np.random.default_rng(1)),
            text="tea",
            limit=50,
        )
    return {c.memory.id: round(c.text_rank or 0.0, 9) for c in found.keyword}


async def test_two_folds_at_once_count_every_row_once(db: Database) -> None:
    """Fold A holds its transaction open; fold B (another process) starts meanwhile and
    waits for A's rows; after A commits, B skips what A summed: the figures stay exact."""
    rng = np.random.default_rng(13)
    for i in range(5):
        async with db.unit_of_work() as session:  # one counter row per transaction
            await _add(session, "finn", Bank.PERSONAL, f"finn plays chess ({i})", rng)
    release = asyncio.Event()
    folded_a = asyncio.Event()
    results: dict[str, int] = {}

    async def fold_a() -> None:
        async with db.unit_of_work() as session:
            results["a"] = await term_stats.fold(session)
            folded_a.set()
            await release.wait()

    async def fold_b() -> None:
        await asyncio.wait_for(folded_a.wait(), timeout=60)
        async with db.unit_of_work() as session:
            results["b"] = await term_stats.fold(session)

    task_a, task_b = asyncio.create_task(fold_a()), asyncio.create_task(fold_b())
    await asyncio.wait_for(folded_a.wait(), timeout=60)
    async with db.unit_of_work() as session:  # a writer beside both folds
        await _add(session, "finn", Bank.PERSONAL, "finn plays go", rng)
    release.set()
    await asyncio.wait_for(asyncio.gather(task_a, task_b), timeout=60)
    assert results["a"] == 1
    await _assert_exact(db)
    async with db.unit_of_work() as session:
        (cell,) = await term_stats.stored_cells(session)
    assert cell[3] == 6
