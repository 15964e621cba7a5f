"""Issue 26: a consolidation works in bounded chunks.

An owner of thousands of memories is clustered chunk by chunk (the similarity matrix is
chunk², not n²) and applied in transactions of at most consolidation.CHUNK_SIZE retired
memories, each committed before the next begins, with the loop free between two: another
user's inlet answers while the run is held between two chunks.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service.core.consolidation import (
    ConsolidationParams,
    Entry,
    Trigger,
    cluster_entries,
    clustering,
)
from service.core.records import (
    Bank,
    ChatContext,
    ChatKind,
    Memory,
    OwnerKind,
    SourceKind,
    Status,
)
from service.embeddings.encoder import Encoder
from service.flows import consolidation, context
from service.flows.consolidation import Outcome, Owner
from service.storage import consolidation as store
from service.storage import memories
from testkit.waiting import wait_until_async
from tests.support.runtimes import RuntimeFactory, runtime_factory

GROUPS = 20  #: near-duplicate triples of the owner
CHUNK = 10  #: consolidation.CHUNK_SIZE in these tests


@pytest.fixture
async def runtime(
    database_url: str, encoder: Encoder, tmp_path: Path
) -> AsyncIterator[RuntimeFactory]:
    async with runtime_factory(database_url, encoder, tmp_path) as build:
        yield build


def _triples(groups: int, dim: int = 384) -> list[np.ndarray]:
    """`groups` × 3 unit vectors; the three of a group have cosine > 0.95, groups ~0."""
    rng = np.random.default_rng(26)
    out = []
    for _ in range(groups):
        base = rng.standard_normal(dim).astype(np.float32)
        for _ in range(3):
            v = base + 0.1 * rng.standard_normal(dim).astype(np.float32)
            out.append(v / np.linalg.norm(v))
    return out


async def _seed(rt: Any, *, user_id: str, vectors: list[np.ndarray]) -> None:
    at = datetime.now(UTC) - timedelta(days=60)  # past the daily run's age gate
    async with rt.db.unit_of_work() as session:
        for i, vector in enumerate(vectors):
            await memories.insert(
                session,
                owner_kind=OwnerKind.USER,
                owner_id=user_id,
                bank=Bank.PERSONAL,
                content=f"User keeps a notebook about subject {i // 3} (copy {i % 3})",
                tags=(),
                confidence=0.9,
                source_kind=SourceKind.MANUAL,
                source_chat_id=None,
                source_message_id=None,
                created_at=at + timedelta(minutes=i),
                embedding=vector,
                embedding_model=rt.encoder.model_name,
            )


class SummaryLLM:
    """Summaries that keep every source's text and cover every source."""

    configured = True

    async def complete(self, messages: Any, **_: Any) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        sources = re.findall(r"^\[(s\d+)\] \(\d{4}-\d{2}-\d{2}\) (.*)$", prompt, re.MULTILINE)
        return json.dumps(
            {"content": "; ".join(t for _, t in sources), "covers": [r for r, _ in sources]}
        )

    async def aclose(self) -> None:
        return None


def test_a_large_cell_is_clustered_in_chunks_and_a_small_one_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    entries = [
        Entry(
            memory=Memory(
                id=uuid.uuid4(),
                seq=i,
                owner_kind=OwnerKind.USER,
                owner_id="ana",
                bank=Bank.PERSONAL,
                content=f"fact {i}",
                tags=(),
                confidence=0.9,
                status=Status.ACTIVE,
                source_kind=SourceKind.MANUAL,
                source_chat_id=None,
                source_message_id=None,
                created_at=at + timedelta(minutes=i),
                updated_at=at,
                last_used_at=None,
            ),
            vector=v,
        )
        for i, v in enumerate(_triples(GROUPS))
    ]
    pools: list[int] = []
    original = clustering._one_pass

    def spy(pool: Any, params: Any) -> Any:
        pools.append(len(pool))
        return original(pool, params)

    monkeypatch.setattr(clustering, "_one_pass", spy)
    chunked = cluster_entries(entries, params=ConsolidationParams(chunk_size=CHUNK))
    assert pools and max(pools) <= CHUNK  # never a 60 × 60 matrix
    assert pools[0] == CHUNK and len(pools) > len(entries) // CHUNK  # leftovers: a 2nd pass
    members = [m.id for c in chunked for m in c.members]
    assert len(members) == len(set(members)) and len(chunked) >= GROUPS
    pools.clear()
    whole = cluster_entries(entries, params=ConsolidationParams(chunk_size=1_000))
    assert pools[0] == len(entries)  # a cell within one chunk: one pool, as before
    assert len(whole) == GROUPS and all(len(c.members) == 3 for c in whole)


async def test_a_run_commits_chunk_by_chunk_and_another_user_is_served_between(
    runtime: RuntimeFactory, db_conn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consolidation, "CHUNK_SIZE", CHUNK)
    rt = runtime(MEMORY_CONSOLIDATION_GUARD="1")
    rt.llm = SummaryLLM()  # type: ignore[assignment]
    await _seed(rt, user_id="ana", vectors=_triples(GROUPS))
    await _seed(rt, user_id="bob", vectors=_triples(2))
    locks = 0
    held, go = asyncio.Event(), asyncio.Event()
    original = store.lock_owner

    async def lock_owner(session: Any, **kwargs: Any) -> None:
        nonlocal locks
        locks += 1
        if locks == 2:  # the second transaction of the run: hold it here
            held.set()
            await go.wait()
        await original(session, **kwargs)

    monkeypatch.setattr(store, "lock_owner", lock_owner)
    run = asyncio.ensure_future(
        consolidation.consolidate(rt, owner=Owner(OwnerKind.USER, "ana"), trigger=Trigger.DAILY)
    )
    try:
        await wait_until_async(lambda: held.is_set() or run.done(), what="the run's 2nd chunk")
        assert held.is_set(), "the run applied everything in one transaction"
        # the first chunk is committed: another connection sees its summaries
        seen = await (
            await db_conn.execute(
                "SELECT count(*) FILTER (WHERE source_kind = 'summary' AND status = 'active'),"
                " count(*) FILTER (WHERE status = 'archived') FROM memories WHERE owner_id = 'ana'"
            )
        ).fetchone()
        assert 0 < seen[0] < GROUPS and 0 < seen[1] <= CHUNK
        bob = ChatContext(user_id="bob", kind=ChatKind.SAVED, chat_id="c-bob")
        answer = await context.build_context(
            rt, chat=bob, message="what notebook do I keep?", budget_tokens=None, now=None
        )
        assert answer.status != context.DEGRADED
    finally:
        go.set()
    result = await run

    assert result.outcome is Outcome.APPLIED
    assert len(result.summaries) == len(result.plan.clusters) >= GROUPS
    # a triple cut by a chunk boundary may merge as a near-duplicate pair, leaving one
    assert result.merged == result.plan.merged >= 3 * GROUPS - GROUPS // (CHUNK // 3) - 1
    # one transaction per chunk of at most CHUNK retired memories, a cluster never split
    chunks = consolidation.chunks_of(
        [(c, None, None) for c in result.plan.clusters],  # type: ignore[misc]
        [],
        size=CHUNK,
    )
    assert all(sum(len(c.members) for c, _, _ in ready) <= CHUNK for ready, _ in chunks)
    assert locks == len(chunks) > 1
    runs = await (
        await db_conn.execute(
            "SELECT count(*), sum(merged) FROM consolidation_runs WHERE owner_id = 'ana'"
        )
    ).fetchone()
    assert runs == (1, result.merged)


class _Crash(Exception):
    """The process dies here: the open transaction is rolled back, nothing after it runs."""


async def _owner_state(db_conn: Any, owner_id: str) -> dict[str, Any]:
    """Every memory of the owner, and the summarizer's audit events, by id."""
    rows = await (
        await db_conn.execute(
            "SELECT id, status, source_kind, superseded_by, summary_of FROM memories "
            "WHERE owner_id = %s",
            (owner_id,),
        )
    ).fetchall()
    events = await (
        await db_conn.execute(
            "SELECT memory_id, action FROM memory_events WHERE owner_id = %s AND actor = %s",
            (owner_id, consolidation.ACTOR),
        )
    ).fetchall()
    return {
        "rows": {r[0]: r[1:] for r in rows},
        "events": sorted((str(m), a) for m, a in events),
    }


def _check_whole(state: dict[str, Any], *, seeded: int) -> None:
    """No memory lost or half-merged: each archived source points at an active summary that
    lists it, each summary's sources are all archived into it, and every change has its
    audit event."""
    rows = state["rows"]
    summaries = {i: r for i, r in rows.items() if r[1] == "summary"}
    archived = {i: r for i, r in rows.items() if r[0] == "archived"}
    assert len(rows) - len(summaries) == seeded  # nothing deleted, nothing but summaries added
    assert all(r[0] == "active" for r in summaries.values())
    for memory_id, (_, kind, superseded_by, _) in archived.items():
        assert kind != "summary" and superseded_by in summaries
        assert memory_id in summaries[superseded_by][3]
    for summary_id, (_, _, _, sources) in summaries.items():
        assert sources and all(archived[s][2] == summary_id for s in sources)
    expected = sorted(
        [(str(i), "create") for i in summaries] + [(str(i), "archive") for i in archived]
    )
    assert state["events"] == expected


async def test_a_run_stopped_between_chunks_leaves_the_owner_whole_and_the_next_finishes_it(
    runtime: RuntimeFactory, db_conn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DESIGN §8 has a run in one transaction; it commits chunk by chunk (docs/howto/summarizer.md)
    monkeypatch.setattr(consolidation, "CHUNK_SIZE", CHUNK)
    rt = runtime(MEMORY_CONSOLIDATION_GUARD="1")
    rt.llm = SummaryLLM()  # type: ignore[assignment]
    await _seed(rt, user_id="ana", vectors=_triples(GROUPS))
    locks = 0
    original = store.lock_owner

    async def dies_in_the_second_chunk(session: Any, **kwargs: Any) -> None:
        nonlocal locks
        locks += 1
        await original(session, **kwargs)
        if locks == 2:
            raise _Crash

    monkeypatch.setattr(store, "lock_owner", dies_in_the_second_chunk)
    ana = Owner(OwnerKind.USER, "ana")
    with pytest.raises(_Crash):
        await consolidation.consolidate(rt, owner=ana, trigger=Trigger.DAILY)

    stopped = await _owner_state(db_conn, "ana")
    _check_whole(stopped, seeded=3 * GROUPS)
    first_chunk = [i for i, r in stopped["rows"].items() if r[1] == "summary"]
    assert 0 < len(first_chunk) < GROUPS  # the first chunk only
    runs = await (
        await db_conn.execute("SELECT count(*) FROM consolidation_runs WHERE owner_id = 'ana'")
    ).fetchone()
    assert runs == (0,)  # the stopped run left no record; its audit events say what it did

    monkeypatch.setattr(store, "lock_owner", original)
    resumed = await consolidation.consolidate(rt, owner=ana, trigger=Trigger.DAILY)
    assert resumed.outcome is Outcome.APPLIED
    finished = await _owner_state(db_conn, "ana")
    _check_whole(finished, seeded=3 * GROUPS)
    # the first chunk's summaries were kept as they were, never clustered again
    assert all(finished["rows"][i][0] == "active" for i in first_chunk)
    summaries = [r for r in finished["rows"].values() if r[1] == "summary"]
    assert len(summaries) >= GROUPS
    archived = sum(r[0] == "archived" for r in finished["rows"].values())
    # as many merged as one uninterrupted run (a triple cut by a chunk edge may merge as a pair)
    assert archived >= 3 * GROUPS - GROUPS // (CHUNK // 3) - 1
    again = await consolidation.consolidate(rt, owner=ana, trigger=Trigger.DAILY)
    assert again.outcome is Outcome.NOTHING
