"""Issue 26: one user's heavy operation never stalls another's inlet.

Heavy CPU steps run on worker threads (asserted on the thread they ran on, not on wall
time), the inlet's query embedding has a lane of its own, bulk operations are set-based
(asserted on the number of transactions), and every cap holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.core import limits, privacy
from service.core.consolidation import Trigger
from service.core.extraction import TurnText
from service.core.records import Bank, ChatContext, ChatKind, OwnerKind, SourceKind
from service.embeddings.encoder import Encoder
from service.flows import commands, consolidation, context, extraction, imports
from service.flows import memories as memory_flow
from service.flows.consolidation import Owner
from service.storage import memories
from testkit.live_service import LiveService
from testkit.waiting import wait_until
from tests.support.runtimes import RuntimeFactory, runtime_factory

CHAT = ChatContext(user_id="ana", kind=ChatKind.SAVED, chat_id="c-ana")
LOOP_THREAD = "MainThread"


@pytest.fixture
async def runtime(
    database_url: str, encoder: Encoder, tmp_path: Path
) -> AsyncIterator[RuntimeFactory]:
    async with runtime_factory(database_url, encoder, tmp_path) as build:
        yield build


def _vector(i: int) -> np.ndarray:
    v = np.random.default_rng(i).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


async def _seed(rt: Any, *, user_id: str, count: int, days_old: int = 0) -> list[Any]:
    """`count` Personal memories of `user_id`, in one transaction (no model call)."""
    at = datetime.now(UTC) - timedelta(days=days_old)
    async with rt.db.unit_of_work() as session:
        return [
            await memories.insert(
                session,
                owner_kind=OwnerKind.USER,
                owner_id=user_id,
                bank=Bank.PERSONAL,
                content=f"User's fact number {i} is about topic {i % 37}",
                tags=(),
                confidence=0.9,
                source_kind=SourceKind.MANUAL,
                source_chat_id=None,
                source_message_id=None,
                created_at=at,
                embedding=_vector(i),
                embedding_model=rt.encoder.model_name,
            )
            for i in range(count)
        ]


@contextlib.contextmanager
def _counting_transactions(rt: Any) -> Iterator[list[int]]:
    """Counts the units of work (one transaction each) opened while the block runs."""
    opened = [0]
    original = rt.db.unit_of_work

    @contextlib.asynccontextmanager
    async def counted() -> AsyncIterator[Any]:
        opened[0] += 1
        async with original() as session:
            yield session

    rt.db.unit_of_work = counted
    try:
        yield opened
    finally:
        rt.db.unit_of_work = original


@contextlib.contextmanager
def _threads_of(module: Any, name: str) -> Iterator[list[str]]:
    """Records the thread each call of `module.name` runs on."""
    seen: list[str] = []
    original = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.current_thread().name)
        return original(*args, **kwargs)

    setattr(module, name, spy)
    try:
        yield seen
    finally:
        setattr(module, name, original)


# --- 2. set-based bulk operations ---------------------------------------------------------


async def test_forget_all_of_thousands_takes_a_few_transactions_and_keeps_every_trace(
    runtime: RuntimeFactory, db_conn: Any
) -> None:
    rt = runtime()
    seeded = await _seed(rt, user_id="ana", count=1_200)
    scope = memory_flow.owned_scope("ana")
    async with rt.db.unit_of_work() as session:
        rows = await memories.export_rows(session, scope=scope)
    with _counting_transactions(rt) as opened:
        forgotten = await memory_flow.forget_all_of(rt, scope=scope, rows=rows, actor="user:ana")

    assert forgotten == len(seeded)
    # a transaction per batch of 500 (memory_flow.FORGET_BATCH), not one per memory
    assert opened[0] <= 4
    counts = await (
        await db_conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'deleted' AND content = ''"
            " AND embedding IS NULL), count(*) FROM memories WHERE owner_id = 'ana'"
        )
    ).fetchone()
    assert counts == (len(seeded), len(seeded))
    events = await (
        await db_conn.execute(
            "SELECT count(*) FILTER (WHERE action = 'forget'),"
            " count(*) FILTER (WHERE jsonb_typeof(before) = 'object'"
            " OR jsonb_typeof(after) = 'object')"
            " FROM memory_events WHERE owner_id = 'ana'"
        )
    ).fetchone()
    assert events == (len(seeded), 0)  # one forget event each; no content left in the trail


async def test_a_forget_all_confirmation_retried_answers_its_result_again(
    runtime: RuntimeFactory,
) -> None:
    rt = runtime()
    await _seed(rt, user_id="ana", count=30)
    async with rt.jobs.open_async():
        _, ask = await commands.run_command(rt, chat=CHAT, command_text="/memory forget all")
        code = re.search(r"/memory forget all ([0-9a-f]{6})", ask).group(1)  # type: ignore[union-attr]
        _, again = await commands.run_command(rt, chat=CHAT, command_text="/memory forget all")
        _, done = await commands.run_command(
            rt, chat=CHAT, command_text=f"/memory forget all {code}"
        )
        # the filter's retry of the same confirmation, after the first run went through
        _, retried = await commands.run_command(
            rt, chat=CHAT, command_text=f"/memory forget all {code}"
        )

    assert code in again  # the same request asked twice gets the same code
    assert done.startswith("Forgot all 30 memories")
    assert retried == done


async def test_an_import_never_takes_an_owner_past_the_memory_cap(
    runtime: RuntimeFactory, db_conn: Any
) -> None:
    rt = runtime(MEMORY_CAP="5")
    await _seed(rt, user_id="ana", count=2)
    export = [
        {
            "content": f"User keeps a plant called number {i}",
            "bank": "personal",
            "status": "active",
            "created_at": "2026-01-01T00:00:00+00:00",
        }
        for i in range(6)
    ]
    async with rt.jobs.open_async():
        result = await imports.restore_export(rt, user_id="ana", data=export, actor="test")

    counts = result.as_json()
    assert counts["added"] == 3
    assert counts["over_cap"] == 3
    active = await (
        await db_conn.execute(
            "SELECT count(*) FROM memories WHERE owner_id = 'ana' AND status = 'active'"
        )
    ).fetchone()
    assert active == (5,)


# --- 1. nothing CPU-heavy on the event loop -----------------------------------------------


async def test_a_20000_operation_answer_is_parsed_off_the_loop_within_the_caps(
    runtime: RuntimeFactory,
) -> None:
    answer = json.dumps(
        {"operations": [{"op": "NEW", "content": f"User likes colour {i}"} for i in range(20_000)]}
    )

    class LLM:
        configured = True

        async def complete(self, messages: Any, **_: Any) -> str:
            return answer

        async def aclose(self) -> None:
            return None

    rt = runtime()
    rt.llm = LLM()  # type: ignore[assignment]
    turn = TurnText(user_message="I like many colours", assistant_message=None, history=[])
    with _threads_of(extraction, "parse_answer") as threads:
        asked = await extraction._ask(rt, chat=CHAT, scope=privacy.write_scope(CHAT), batch=[turn])

    assert threads and LOOP_THREAD not in threads
    assert len(asked.parsed.operations) == limits.MAX_OPERATIONS
    assert len(answer) > limits.MAX_ANSWER_CHARS  # the large answer's path: no json-repair


async def test_the_secret_scans_of_a_huge_answers_operations_run_off_the_loop(
    runtime: RuntimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.core import safety

    answer = json.dumps(
        {"operations": [{"op": "NEW", "content": f"User likes colour {i}"} for i in range(500)]}
    )

    class LLM:
        configured = True

        async def complete(self, messages: Any, **_: Any) -> str:
            return answer

        async def aclose(self) -> None:
            return None

    rt = runtime()
    rt.llm = LLM()  # type: ignore[assignment]
    scanned: list[tuple[str, str]] = []
    original = safety.redact_secrets

    def spy(text: str, *args: Any, **kwargs: Any) -> str:
        scanned.append((threading.current_thread().name, text))
        return original(text, *args, **kwargs)

    monkeypatch.setattr(safety, "redact_secrets", spy)
    turn = TurnText(user_message="I like many colours", assistant_message=None, history=[])
    await extraction._ask(rt, chat=CHAT, scope=privacy.write_scope(CHAT), batch=[turn])

    of_operations = [thread for thread, text in scanned if text.startswith("User likes colour")]
    assert len(of_operations) >= limits.MAX_OPERATIONS
    assert LOOP_THREAD not in of_operations


async def test_an_import_is_guarded_and_deduplicated_off_the_loop(
    runtime: RuntimeFactory,
) -> None:
    rt = runtime()
    export = [
        {
            "content": f"User owns a bike numbered {i}",
            "bank": "personal",
            "created_at": "2026-01-01T00:00:00+00:00",
        }
        for i in range(40)
    ]
    with _threads_of(imports, "guard") as threads:
        async with rt.jobs.open_async():
            result = await imports.restore_export(rt, user_id="ana", data=export, actor="test")

    assert result.as_json()["added"] == 40
    assert len(threads) == 40 and LOOP_THREAD not in threads


async def test_a_consolidation_plans_its_clusters_off_the_loop(runtime: RuntimeFactory) -> None:
    rt = runtime()
    await _seed(rt, user_id="ana", count=60, days_old=60)
    with _threads_of(consolidation.policy, "plan_owner") as threads:
        result = await consolidation.consolidate(
            rt, owner=Owner(OwnerKind.USER, "ana"), trigger=Trigger.DAILY, dry_run=True
        )

    assert result.plan.active_before == 60
    assert threads and LOOP_THREAD not in threads


async def test_an_inlet_query_never_waits_behind_bulk_embedding(encoder: Encoder) -> None:
    """The bulk lane is held (an import's chunk that does not finish) while a query is
    embedded: the query's own lane answers."""
    release = threading.Event()
    original = encoder._model.embed

    def embed(texts: Any) -> Any:
        if threading.current_thread().name.startswith("embed-bulk"):
            release.wait(timeout=120)
        return original(texts)

    encoder._model.embed = embed
    try:
        bulk = asyncio.ensure_future(
            encoder.encode([f"imported fact {i} of 200" for i in range(200)], bulk=True)
        )
        await asyncio.sleep(0)
        vector = await asyncio.wait_for(encoder.encode_one("what do I like to eat?"), 60)
        assert not bulk.done()
        release.set()
        vectors = await bulk
    finally:
        release.set()
        encoder._model.embed = original

    assert vector.shape == (encoder.dimension,)
    assert vectors.shape == (200, encoder.dimension)


async def test_a_question_never_waits_behind_another_users_long_message(
    runtime: RuntimeFactory, encoder: Encoder
) -> None:
    """User A's 15,000-character message is being embedded and does not finish: user B's
    inlet (the whole read path) answers meanwhile, and not degraded."""
    entered, release = threading.Event(), threading.Event()
    original = encoder._model.embed
    long = "I keep notes about my garden and my bicycle trips. " * 300

    def embed(texts: Any) -> Any:
        if any(len(t) > 1_000 for t in texts):
            entered.set()
            release.wait(timeout=120)
        return original(texts)

    # a deadline far away: B's answer is judged on what it waited for, not on the machine
    rt = runtime(MEMORY_CONTEXT_DEADLINE_S="30")
    await _seed(rt, user_id="bob", count=5)
    bob = ChatContext(user_id="bob", kind=ChatKind.SAVED, chat_id="c-bob")
    encoder._model.embed = embed
    try:
        a = asyncio.ensure_future(
            context.build_context(rt, chat=CHAT, message=long, budget_tokens=None, now=None)
        )
        assert await asyncio.to_thread(entered.wait, 60)
        b = await asyncio.wait_for(
            context.build_context(
                rt, chat=bob, message="what do I like to cook?", budget_tokens=None, now=None
            ),
            60,
        )
        assert not a.done()  # A's message is still being embedded
        release.set()
        answered = await a
    finally:
        release.set()
        encoder._model.embed = original

    assert b.status != context.DEGRADED
    assert answered.status != context.DEGRADED


def test_offload_runs_one_step_per_owner_at_a_time() -> None:
    from service.flows import offload  # new in issue 26

    async def scenario() -> list[tuple[str, str]]:
        log: list[tuple[str, str]] = []
        gate = threading.Event()

        def step(owner: str, name: str) -> str:
            log.append((owner, f"start {name}"))
            if name == "a1":
                gate.wait(timeout=60)
            log.append((owner, f"end {name}"))
            return threading.current_thread().name

        first = asyncio.ensure_future(offload.in_worker("a", step, "a", "a1"))
        second = asyncio.ensure_future(offload.in_worker("a", step, "a", "a2"))
        other = await offload.in_worker("b", step, "b", "b1")  # a free thread beside a's
        assert other.startswith("bulk-cpu")
        gate.set()
        await asyncio.gather(first, second)
        return log

    log = asyncio.run(scenario())
    a_steps = [what for owner, what in log if owner == "a"]
    assert a_steps == ["start a1", "end a1", "start a2", "end a2"]
    assert log.index(("b", "end b1")) < log.index(("a", "end a1"))


# --- 3. the query is what the model reads ---------------------------------------------------


async def test_a_long_message_is_looked_up_as_far_as_the_model_reads(
    runtime: RuntimeFactory, encoder: Encoder
) -> None:
    long = "I am planning a trip to Peru and need to pack light for hiking. " * 240
    assert len(long) > 15_000
    read = encoder.model_text(long)
    assert len(read) < 2_000 and long.startswith(read)
    whole, cut = encoder.encode_sync([long, read])
    assert float(np.dot(whole, cut)) > 0.9999  # the same vector: nothing the model read is lost

    rt = runtime()
    await _seed(rt, user_id="ana", count=5)
    looked_up: list[str] = []
    original = context.candidates.gather

    async def spy(rt: Any, *, query: str, **kwargs: Any) -> Any:
        looked_up.append(query)
        return await original(rt, query=query, **kwargs)

    context.candidates.gather = spy  # type: ignore[assignment]
    try:
        await context.build_context(rt, chat=CHAT, message=long, budget_tokens=None, now=None)
    finally:
        context.candidates.gather = original  # type: ignore[assignment]
    assert looked_up == [read]


def test_a_short_text_is_read_whole(encoder: Encoder) -> None:
    assert encoder.model_text("Where do I live?") == "Where do I live?"


# --- 4. ready means warm ------------------------------------------------------------------


def test_readyz_waits_for_the_warm_up_and_the_first_turn_is_served_warm(
    database_url: str, encoder: Encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.flows import warmup  # new in issue 26

    entered, release = threading.Event(), threading.Event()
    original = warmup.warm_up
    ran: list[str] = []

    async def slow_warm_up(rt: Any) -> None:
        entered.set()
        await asyncio.to_thread(release.wait, 120)
        await original(rt)
        ran.append("warm-up")

    monkeypatch.setattr(warmup, "warm_up", slow_warm_up)
    live = LiveService.start(
        database_url=database_url, encoder=encoder, state_dir=tmp_path / "s", until="/healthz"
    )
    try:
        assert entered.wait(60)
        held = httpx.get(f"{live.base_url}/readyz", timeout=30)
        assert (held.status_code, held.json()["status"]) == (503, "warming up")
        assert httpx.get(f"{live.base_url}/healthz", timeout=30).status_code == 200
        release.set()
        wait_until(
            lambda: httpx.get(f"{live.base_url}/readyz", timeout=30).status_code == 200,
            what="/readyz after the warm-up",
        )
        assert ran == ["warm-up"] and live.app.state.runtime.warm
        first = live.client.post(
            "/v1/context",
            json={"chat": {"user_id": "ana", "kind": "saved", "chat_id": "c1"}, "message": "hi"},
        )
    finally:
        release.set()
        live.stop()
    assert first.status_code == 200
    assert first.json()["status"] != context.DEGRADED
