"""Per-owner HNSW and full-text indexes: built and dropped by the job, used by the read path,
the same answers as the exact scans, a fallback when the index comes back short, and never
another owner's rows. Real PostgreSQL + pgvector, real embedding model."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy import text as sql

from service.core.records import Bank, OwnerKind, ReadScope, Scope, SourceKind
from service.embeddings.encoder import Encoder
from service.flows import candidates as candidates_flow
from service.flows import owner_indexes
from service.flows.runtime import Runtime
from service.storage import hybrid_search, memories
from service.storage import owner_indexes as catalog
from testkit.live_service import LiveService
from testkit.waiting import wait_until
from tests.support.runtimes import RuntimeFactory, runtime_factory

ALICE = Scope(OwnerKind.USER, "alice", Bank.PERSONAL)
ALICE_HABITS = Scope(OwnerKind.USER, "alice", Bank.INTERACTION)
BOB = Scope(OwnerKind.USER, "bob", Bank.PERSONAL)

_PEOPLE = ("User", "User's sister", "User's neighbour", "User's manager", "User's son")
_DOINGS = (
    "plays tennis",
    "grows tomatoes",
    "collects vinyl records",
    "restores old bicycles",
    "bakes sourdough bread",
    "studies Japanese",
    "repairs clocks",
    "runs marathons",
    "paints watercolours",
    "keeps bees",
    "writes poetry",
    "builds drones",
)
_WHEN = (
    "on weekends",
    "every morning",
    "in the summer",
    "after work",
    "twice a month",
    "since 2019",
    "with friends",
)

QUESTIONS = (
    "Who in the family does sport?",
    "Any hobbies with food?",
    "What does the user do on weekends?",
    "Tell me about music",
    "Which crafts with tools?",
    "Something about languages",
    "bees and honey",
    "outdoor activities in summer",
)


def facts(n: int, *, offset: int = 0) -> list[str]:
    """`n` distinct short facts (people × activities × times)."""
    combos = list(itertools.product(_PEOPLE, _DOINGS, _WHEN))
    return [f"{p} {d} {w}." for p, d, w in combos[offset : offset + n]]


@pytest.fixture
async def runtime(
    database_url: str, encoder: Encoder, tmp_path: Path
) -> AsyncIterator[RuntimeFactory]:
    """Runtimes on the test database with extra settings: `runtime(MEMORY_ANN_MIN_MEMORIES=…)`."""
    async with runtime_factory(database_url, encoder, tmp_path) as build:
        yield build


async def _connect(rt: Runtime, *, autocommit: bool = False) -> psycopg.AsyncConnection[Any]:
    """A connection of its own to the runtime's database (the tests always set its URL)."""
    assert rt.settings.database_url is not None
    return await psycopg.AsyncConnection.connect(rt.settings.database_url, autocommit=autocommit)


async def store(rt: Runtime, cell: Scope, texts: list[str]) -> list[int]:
    """Insert `texts` as active memories of `cell`, embedded by the real model; their seqs."""
    vectors = await rt.encoder.encode(texts)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    seqs = []
    async with rt.db.unit_of_work() as session:
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            memory = await memories.insert(
                session,
                owner_kind=cell.owner_kind,
                owner_id=cell.owner_id,
                bank=cell.bank,
                content=text,
                tags=[],
                confidence=0.5 + (i % 5) / 10,
                source_kind=SourceKind.MANUAL,
                source_chat_id=None,
                source_message_id=None,
                created_at=start + timedelta(hours=i),
                embedding=vector,
                embedding_model=rt.encoder.model_name,
            )
            seqs.append(memory.seq)
    return seqs


async def indexed_cells(rt: Runtime, scope: ReadScope) -> catalog.IndexedCells:
    rt.owner_indexes.forget()
    async with rt.db.unit_of_work() as session:
        return await rt.owner_indexes.cells(
            session,
            scope,
            model=rt.encoder.model_name,
            dimension=rt.encoder.dimension,
            ef_search=rt.settings.ann_ef_search,
        )


async def search_both_ways(
    rt: Runtime,
    scope: ReadScope,
    question: str,
    limit: int,
) -> tuple[hybrid_search.CandidateSets, hybrid_search.CandidateSets]:
    """(through the per-owner indexes, exact scans only) for one question."""
    vector = await rt.encoder.encode_one(question)
    indexed = await indexed_cells(rt, scope)
    async with rt.db.unit_of_work() as session:
        fast = await hybrid_search.candidates(
            session, scope=scope, query_vector=vector, text=question, limit=limit, indexed=indexed
        )
    async with rt.db.unit_of_work() as session:
        exact = await hybrid_search.candidates(
            session, scope=scope, query_vector=vector, text=question, limit=limit
        )
    return fast, exact


def seqs_of(found: list[Any]) -> list[int]:
    return [c.memory.seq for c in found]


async def plan_of(rt: Runtime, scope: ReadScope, question: str, limit: int) -> str:
    """EXPLAIN of the candidates statement as the read path sends it."""
    vector = await rt.encoder.encode_one(question)
    indexed = await indexed_cells(rt, scope)
    lines: list[str] = []
    engine = rt.db.engine.sync_engine

    def explain(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
    ) -> tuple[str, Any]:
        if "nearest" in statement and not lines:
            statement = "EXPLAIN " + statement
        return statement, parameters

    def collect(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
    ) -> None:
        if statement.startswith("EXPLAIN"):
            lines.extend(row[0] for row in cursor.fetchall())

    event.listen(engine, "before_cursor_execute", explain, retval=True)
    event.listen(engine, "after_cursor_execute", collect)
    try:
        async with rt.db.unit_of_work() as session:
            await hybrid_search.candidates(
                session,
                scope=scope,
                query_vector=vector,
                text=question,
                limit=limit,
                indexed=indexed,
            )
    finally:
        event.remove(engine, "before_cursor_execute", explain)
        event.remove(engine, "after_cursor_execute", collect)
    return "\n".join(lines)


# -- the job --------------------------------------------------------------------------------


async def test_job_builds_indexes_for_heavy_banks_only_and_is_idempotent(
    runtime: RuntimeFactory,
) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=100)
    await store(rt, ALICE, facts(120))
    await store(rt, BOB, facts(60))
    first = await owner_indexes.refresh(rt)
    model, dim = rt.encoder.model_name, rt.encoder.dimension
    alice = {
        catalog.ann_index_name(ALICE, model=model, dimension=dim),
        catalog.fts_index_name(ALICE),
    }
    assert set(first.built) == alice
    assert first.dropped == () and first.failed == ()
    async with await _connect(rt) as conn:
        assert await catalog.existing_indexes(conn) == dict.fromkeys(alice, True)
        definition = await (
            await conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                (catalog.ann_index_name(ALICE, model=model, dimension=dim),),
            )
        ).fetchone()
    assert definition is not None
    assert "hnsw (((embedding)::vector(384)) vector_cosine_ops)" in definition[0]
    assert "owner_id)::text = 'alice'::text" in definition[0]
    assert "embedding_model)::text = 'all-MiniLM-L6-v2'::text" in definition[0]
    again = await owner_indexes.refresh(rt)
    assert again.built == () and again.dropped == ()


async def test_job_keeps_indexes_down_to_half_the_threshold_then_drops_them(
    runtime: RuntimeFactory,
) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=100)
    seqs = await store(rt, ALICE, facts(110))
    await owner_indexes.refresh(rt)

    async def archive(keep: int) -> None:
        async with await _connect(rt) as conn:
            await conn.execute(
                "UPDATE memories SET status = 'archived' WHERE seq = ANY(%s)", (seqs[keep:],)
            )
            await conn.commit()

    await archive(60)  # below the threshold, above half of it: kept
    kept = await owner_indexes.refresh(rt)
    assert kept.built == () and kept.dropped == ()
    await archive(40)  # below half: dropped
    dropped = await owner_indexes.refresh(rt)
    assert len(dropped.dropped) == 2 and dropped.built == ()
    async with await _connect(rt) as conn:
        assert await catalog.existing_indexes(conn) == {}


async def test_job_replaces_another_models_index_and_a_failed_build(
    runtime: RuntimeFactory,
) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=50)
    await store(rt, ALICE, facts(60))
    async with await _connect(rt, autocommit=True) as conn:
        # an index of a model no longer loaded, and a build that failed half-way: a 16-d
        # cast of 384-d vectors is refused, leaving an invalid index behind
        other = await catalog.create_ann_index(conn, ALICE, model="an-older-model", dimension=384)
        with pytest.raises(psycopg.errors.DataException):
            await catalog.create_ann_index(conn, ALICE, model="all-MiniLM-L6-v2", dimension=16)
        broken = catalog.ann_index_name(ALICE, model="all-MiniLM-L6-v2", dimension=16)
        assert await catalog.existing_indexes(conn) == {other: True, broken: False}
    result = await owner_indexes.refresh(rt)
    assert set(result.dropped) == {other, broken}
    wanted = {
        catalog.ann_index_name(ALICE, model=rt.encoder.model_name, dimension=384),
        catalog.fts_index_name(ALICE),
    }
    assert set(result.built) == wanted
    async with await _connect(rt) as conn:
        assert await catalog.existing_indexes(conn) == dict.fromkeys(wanted, True)


async def test_job_with_threshold_zero_drops_everything(runtime: RuntimeFactory) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=50)
    await store(rt, ALICE, facts(60))
    await owner_indexes.refresh(rt)
    off = await owner_indexes.refresh(runtime(MEMORY_ANN_MIN_MEMORIES=0))
    assert len(off.dropped) == 2


async def test_only_one_refresh_runs_at_a_time(runtime: RuntimeFactory) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=50)
    async with await _connect(rt, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (owner_indexes.LOCK_KEY,))
        assert (await owner_indexes.refresh(rt)).busy
        await conn.execute("SELECT pg_advisory_unlock(%s)", (owner_indexes.LOCK_KEY,))
    assert not (await owner_indexes.refresh(rt)).busy


# -- the read path --------------------------------------------------------------------------


async def test_indexed_path_uses_the_indexes_and_returns_the_exact_answers(
    runtime: RuntimeFactory,
) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=300)
    await store(rt, ALICE, facts(400))
    await store(rt, ALICE_HABITS, facts(30, offset=50))  # a light bank next to the heavy one
    await store(rt, BOB, facts(300, offset=100))
    await owner_indexes.refresh(rt)
    scope = ReadScope((ALICE, ALICE_HABITS))
    indexed = await indexed_cells(rt, scope)
    assert indexed.ann == {ALICE} and indexed.fts == {ALICE}

    plan = await plan_of(rt, scope, QUESTIONS[0], 10)
    hnsw = catalog.ann_index_name(ALICE, model=rt.encoder.model_name, dimension=384)
    assert f"Index Scan using {hnsw} on memories" in plan
    # full text: the postings of the query's lexemes (migration 0014), not the bank's rows
    assert "Index Only Scan using pk_memory_postings on memory_postings" in plan

    for question in QUESTIONS:
        fast, exact = await search_both_ways(rt, scope, question, 10)
        assert fast.exact_fallbacks == 0
        assert seqs_of(fast.semantic) == seqs_of(exact.semantic)
        assert [c.similarity for c in fast.semantic] == [c.similarity for c in exact.semantic]
        assert seqs_of(fast.keyword) == seqs_of(exact.keyword)
        assert [c.text_rank for c in fast.keyword] == [c.text_rank for c in exact.keyword]


async def test_indexed_path_recall_of_fifty_candidates(runtime: RuntimeFactory) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=300)
    await store(rt, ALICE, facts(400))
    await owner_indexes.refresh(rt)
    scope = ReadScope((ALICE,))
    recalls = []
    for question in QUESTIONS:
        fast, exact = await search_both_ways(rt, scope, question, 50)
        assert len(fast.semantic) == 50
        recalls.append(len(set(seqs_of(fast.semantic)) & set(seqs_of(exact.semantic))) / 50)
    assert min(recalls) >= 0.96
    assert float(np.mean(recalls)) >= 0.99


async def test_hnsw_ef_search_is_set_only_when_the_connection_lacks_it(
    runtime: RuntimeFactory,
) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=300)  # connections start with ef_search 100
    await store(rt, ALICE, facts(400))
    await owner_indexes.refresh(rt)
    sent: list[str] = []

    def record(*args: Any) -> None:  # (conn, cursor, statement, …)
        sent.append(args[2])

    event.listen(rt.db.engine.sync_engine, "before_cursor_execute", record)
    # 2 × 50 = 100, what the connection has: nothing to set; 2 × 60 = 120: set once
    for limit, set_configs in ((50, 0), (60, 1)):
        sent.clear()
        fast, exact = await search_both_ways(rt, ReadScope((ALICE,)), QUESTIONS[0], limit)
        assert sum("set_config" in s for s in sent) == set_configs
        assert seqs_of(fast.semantic) == seqs_of(exact.semantic)
    async with rt.db.unit_of_work() as session:  # the raised value lasted one transaction
        assert (await session.execute(sql("SHOW hnsw.ef_search"))).scalar_one() == "100"


async def test_the_inlets_candidates_read_runs_outside_a_transaction_only_when_it_sets_nothing(
    runtime: RuntimeFactory,
) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=300)  # connections start with ef_search 100
    await store(rt, ALICE, facts(400))
    await owner_indexes.refresh(rt)
    scope = ReadScope((ALICE,))
    vector = await rt.encoder.encode_one(QUESTIONS[0])
    async with rt.db.reads() as session:  # autocommit: each statement its own transaction
        first, second = [
            (await session.execute(sql("SELECT txid_current()"))).scalar_one() for _ in range(2)
        ]
    assert second == first + 1
    async with rt.db.unit_of_work() as session:
        first, second = [
            (await session.execute(sql("SELECT txid_current()"))).scalar_one() for _ in range(2)
        ]
    assert second == first
    # 2 × 60 = 120 must be SET LOCAL: refused outside a transaction, where it would not last
    indexed = await indexed_cells(rt, scope)
    async with rt.db.reads() as session:
        with pytest.raises(RuntimeError, match="in a transaction"):
            await hybrid_search.candidates(
                session,
                scope=scope,
                query_vector=vector,
                text=QUESTIONS[0],
                limit=60,
                indexed=indexed,
            )
    # the read path's own call picks the transaction for it, and finds what the exact scan finds
    for limit in (50, 60):
        fast = await candidates_flow.gather(
            rt, scope=scope, query=QUESTIONS[0], query_vector=vector, limit=limit
        )
        _, exact = await search_both_ways(rt, scope, QUESTIONS[0], limit)
        assert seqs_of(fast.semantic) == seqs_of(exact.semantic)
        assert len(fast.semantic) == limit


async def test_index_short_of_rows_falls_back_to_the_exact_scan(runtime: RuntimeFactory) -> None:
    # ef_search 40 (2 × 20): the graph still holds the 340 archived rows, so its 40 nearest
    # entries hold few active ones
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=300, MEMORY_ANN_EF_SEARCH=1)
    seqs = await store(rt, ALICE, facts(400))
    await owner_indexes.refresh(rt)
    async with await _connect(rt) as conn:
        await conn.execute(
            "UPDATE memories SET status = 'archived' WHERE seq = ANY(%s)", (seqs[60:],)
        )
        await conn.commit()
    scope = ReadScope((ALICE,))
    for question in QUESTIONS[:3]:
        fast, exact = await search_both_ways(rt, scope, question, 20)
        assert fast.exact_fallbacks == 1
        assert seqs_of(fast.semantic) == seqs_of(exact.semantic)
        assert len(fast.semantic) == 20
        assert set(seqs_of(fast.semantic)) <= set(seqs[:60])


async def test_an_owners_index_never_returns_another_owners_rows(runtime: RuntimeFactory) -> None:
    rt = runtime(MEMORY_ANN_MIN_MEMORIES=100)
    texts = facts(150)
    alice = await store(rt, ALICE, texts)
    bob = await store(rt, BOB, texts)  # the same texts: every distance ties across owners
    await owner_indexes.refresh(rt)
    assert (await indexed_cells(rt, ReadScope((ALICE, BOB)))).ann == {ALICE, BOB}
    for cell, own in ((ALICE, set(alice)), (BOB, set(bob))):
        for question in (*QUESTIONS[:3], texts[0], texts[77]):
            fast, _ = await search_both_ways(rt, ReadScope((cell,)), question, 50)
            assert fast.exact_fallbacks == 0
            found = {c.memory.seq for c in fast.semantic} | {c.memory.seq for c in fast.keyword}
            assert found and found <= own
            assert {c.memory.owner_id for c in fast.semantic} == {cell.owner_id}
    # a light owner next to indexed ones is searched exactly, within its own rows
    carol = Scope(OwnerKind.USER, "carol", Bank.PERSONAL)
    carols = await store(rt, carol, texts[:20])
    fast, exact = await search_both_ways(rt, ReadScope((carol,)), texts[3], 50)
    assert seqs_of(fast.semantic) == seqs_of(exact.semantic)
    assert set(seqs_of(fast.semantic)) == set(carols)


# -- the service ----------------------------------------------------------------------------


def test_service_builds_indexes_in_the_background_and_answers_from_them(
    service_factory: Callable[..., LiveService],
    database_url: str,
) -> None:
    live: LiveService = service_factory(MEMORY_ANN_MIN_MEMORIES="40", MEMORY_ANN_REFRESH_S="0.5")
    for text in facts(45):
        answer = live.client.post("/v1/users/dana/memories", json={"content": text})
        assert answer.status_code == 201, answer.text
    cell = Scope(OwnerKind.USER, "dana", Bank.PERSONAL)
    wanted = [
        catalog.ann_index_name(cell, model="all-MiniLM-L6-v2", dimension=384),
        catalog.fts_index_name(cell),
    ]

    def indexes() -> dict[str, bool]:
        with psycopg.connect(database_url) as conn:
            return dict(
                conn.execute(
                    "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c "
                    "ON c.oid = i.indexrelid WHERE c.relname = ANY(%s)",
                    (wanted,),
                ).fetchall()
            )

    wait_until(lambda: indexes() == dict.fromkeys(wanted, True), what=f"valid {wanted}")
    block = live.client.post(
        "/v1/context",
        json={
            "chat": {"user_id": "dana", "chat_id": "c-9", "kind": "saved"},
            "message": "Does anyone in my family bake bread?",
        },
    ).json()["block"]
    assert "bakes sourdough bread" in block
