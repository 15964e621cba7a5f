"""Extraction raced by forget, forget all, edits, chat deletion and other extractions
(DESIGN §5.6: a forget wins every race; no database resource is held across an LLM call).

Each test holds an extraction inside its LLM call (`tests/support/llm_gate.py`), runs the
racing operation, then lets the answer through and checks the exact rows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service import observability
from service.embeddings.encoder import Encoder
from service.errors import LLMUnavailable, MemoryNotFound
from service.flows import context as context_flow
from service.flows import memories as memory_flow
from service.flows.extraction import RunMode, run_extraction
from service.flows.runtime import Runtime
from service.flows.turns import requeue_waiting_turns
from testkit.extraction_replies import (
    by_message,
    chat_summary_answer,
    is_chat_summary_request,
    new_op,
)
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until_async as wait_until
from tests.support.llm_gate import LLMGate
from tests.support.races import (
    chat,
    event_texts,
    forget_all,
    integrity,
    memory_rows,
    queue_turn,
    race_runtime,
    seed,
    turn_rows,
)

PARIS = "User lives in Paris"
BERLIN = "User lives in Berlin"
MOVED = "I moved to Berlin last month."


@pytest.fixture
def gate() -> LLMGate:
    return LLMGate(by_message({}))


@pytest.fixture
def llm(gate: LLMGate) -> Iterator[LLMStub]:
    with LLMStub(responder=gate) as stub:
        yield stub
    gate.open()


@pytest.fixture
async def rt(
    database_url: str, encoder: Encoder, tmp_path: Path, llm: LLMStub
) -> AsyncIterator[Runtime]:
    async with race_runtime(
        database_url, encoder, tmp_path / "state", llm_base_url=llm.base_url
    ) as runtime:
        yield runtime


def _dropped(reason: str) -> float:
    """extraction_dropped_operations_total{reason} so far (0 before the counter existed)."""
    counter = getattr(observability, "DROPPED_OPERATIONS", None)
    return float(counter.labels(reason=reason)._value.get()) if counter else 0.0


async def _held_extraction(rt: Runtime, gate: LLMGate, turn_id: int) -> asyncio.Task[Any]:
    """An extraction of `turn_id` started and waiting inside its LLM call."""
    gate.close()
    arrived = gate.arrived
    task = asyncio.create_task(run_extraction(rt, turn_id=turn_id, mode=RunMode.FLUSH))
    await gate.wait_arrived(arrived + 1)
    return task


async def _finishes_while_held(operation: Any, extraction: asyncio.Task[Any]) -> Any:
    """Run `operation` to its end while `extraction` still waits for the LLM (it must not
    wait for it: a forget never waits for an LLM)."""
    task = asyncio.ensure_future(operation)
    await wait_until(lambda: task.done() or extraction.done(), timeout_s=30, what="the operation")
    assert not extraction.done(), "the operation waited until the extraction's LLM call ended"
    return await task


# --- item 1: a forget racing an extraction never brings the memory back ---------------------


@pytest.mark.parametrize("when", ["before_the_call", "during_the_call", "after_the_answer"])
async def test_a_memory_forgotten_while_the_llm_answers_update_stays_forgotten(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection, when: str
) -> None:
    """Forgotten before or during the call: the UPDATE is dropped, the tombstone stays
    deleted, and "Paris" is written nowhere. Forgotten after, by the id the user was shown
    (Paris, superseded since): the successor goes too — forgetting any version forgets the
    fact (issue 27; before, Berlin stayed active and injected after "Forgotten")."""
    gate.responder = by_message({"Berlin": [new_op(BERLIN, op="UPDATE", ref="m1")]})
    paris = await seed(rt, user_id="u1", content=PARIS)
    turn = await queue_turn(rt, context=chat("u1", "c1"), message=MOVED, message_id="t1")
    dropped = _dropped("target_changed")
    if when == "before_the_call":
        await memory_flow.forget_for_user(rt, user_id="u1", memory_id=paris.id)
        await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
    elif when == "during_the_call":
        extraction = await _held_extraction(rt, gate, turn)
        await _finishes_while_held(
            memory_flow.forget_for_user(rt, user_id="u1", memory_id=paris.id), extraction
        )
        gate.release()
        await extraction
    else:
        await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
        await memory_flow.forget_for_user(rt, user_id="u1", memory_id=paris.id)
    rows = await memory_rows(db_conn)
    if when == "after_the_answer":
        assert rows == [("u1", "", "deleted", 3), ("u1", "", "deleted", 2)]
        assert await turn_rows(db_conn) == [("done", 1)]
    else:
        assert rows == [("u1", "", "deleted", 2)]
        assert await turn_rows(db_conn) == [("done", 0)]
    # before the call the LLM was not shown the forgotten memory at all
    assert _dropped("target_changed") - dropped == (1 if when == "during_the_call" else 0)
    assert not [t for t in await event_texts(db_conn) if "Paris" in t]
    found = await integrity(db_conn, forgotten_texts=[PARIS])
    assert found.as_dict() == {"resurrected": 0, "double_successors": 0, "stuck_turns": 0}


async def test_a_memory_forgotten_while_the_llm_answers_delete_stays_deleted(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """The DELETE is dropped: the tombstone is not archived, its text not audited again."""
    gate.responder = by_message({"anymore": [new_op("", op="DELETE", ref="m1")]})
    paris = await seed(rt, user_id="u1", content=PARIS)
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="I don't live in Paris anymore.", message_id="t1"
    )
    extraction = await _held_extraction(rt, gate, turn)
    await _finishes_while_held(
        memory_flow.forget_for_user(rt, user_id="u1", memory_id=paris.id), extraction
    )
    gate.release()
    await extraction
    assert await memory_rows(db_conn) == [("u1", "", "deleted", 2)]
    assert not [t for t in await event_texts(db_conn) if "Paris" in t]
    cursor = await db_conn.execute("SELECT action FROM memory_events ORDER BY id")
    assert [a for (a,) in await cursor.fetchall()] == ["create", "forget"]


async def test_a_new_fact_repeating_a_memory_forgotten_meanwhile_is_not_stored(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """The LLM restates a memory it was shown while the user forgets it: not written again."""
    gate.responder = by_message({"Paris": [new_op("User lives in Paris.")]})
    paris = await seed(rt, user_id="u1", content=PARIS)
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="As I said, Paris is home.", message_id="t1"
    )
    extraction = await _held_extraction(rt, gate, turn)
    await _finishes_while_held(
        memory_flow.forget_for_user(rt, user_id="u1", memory_id=paris.id), extraction
    )
    gate.release()
    await extraction
    assert await memory_rows(db_conn) == [("u1", "", "deleted", 2)]
    assert not [t for t in await event_texts(db_conn) if "Paris" in t]


async def test_an_edit_while_the_llm_answers_update_keeps_the_users_edit(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """The user's edit changed the version the LLM was shown: the UPDATE is dropped."""
    gate.responder = by_message({"Berlin": [new_op(BERLIN, op="UPDATE", ref="m1")]})
    paris = await seed(rt, user_id="u1", content=PARIS)
    turn = await queue_turn(rt, context=chat("u1", "c1"), message=MOVED, message_id="t1")
    extraction = await _held_extraction(rt, gate, turn)
    await _finishes_while_held(
        memory_flow.edit_for_user(
            rt, user_id="u1", memory_id=paris.id, content="User lives in Lyon", bank=None, tags=None
        ),
        extraction,
    )
    gate.release()
    await extraction
    assert await memory_rows(db_conn) == [("u1", "User lives in Lyon", "active", 2)]
    assert await turn_rows(db_conn) == [("done", 0)]


# --- item 5: nothing waits on a hanging LLM --------------------------------------------------


async def test_forget_all_does_not_wait_for_an_extraction_held_in_its_llm_call(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    gate.responder = by_message({"Berlin": [new_op(BERLIN, op="UPDATE", ref="m1")]})
    await seed(rt, user_id="u1", content=PARIS)
    turn = await queue_turn(rt, context=chat("u1", "c1"), message=MOVED, message_id="t1")
    extraction = await _held_extraction(rt, gate, turn)
    answer = await _finishes_while_held(forget_all(rt, user_id="u1"), extraction)
    assert answer.startswith("Forgot 1 memory.")
    gate.release()
    await extraction
    assert await memory_rows(db_conn) == [("u1", "", "deleted", 2)]
    assert await turn_rows(db_conn) == [("discarded", 0)]


async def test_chat_deletion_does_not_wait_for_an_extraction_held_in_its_llm_call(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """The chat is deleted while its turn is being extracted: nothing is written for it."""
    gate.responder = by_message({"cello": [new_op("User plays the cello")]})
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="I play the cello.", message_id="t1"
    )
    extraction = await _held_extraction(rt, gate, turn)
    await _finishes_while_held(
        memory_flow.forget_chat(rt, chat_ids=["c1"], actor="openwebui"), extraction
    )
    dropped = _dropped("turn_closed")
    gate.release()
    await extraction
    assert await memory_rows(db_conn) == []
    assert await turn_rows(db_conn) == [("discarded", 0)]
    assert _dropped("turn_closed") - dropped == 1


@pytest.mark.parametrize("racing", ["chat_deletion", "forget_of_the_fact"])
async def test_a_rolling_summary_held_in_its_llm_call_delays_no_forget_and_is_dropped(
    database_url: str,
    encoder: Encoder,
    tmp_path: Path,
    db_conn: psycopg.AsyncConnection,
    racing: str,
) -> None:
    """The rolling summary's LLM call holds no lock either: deleting the chat or forgetting
    the fact its message gave is not delayed, and the summary (which would repeat the
    message) is not written."""
    summary_gate = LLMGate(
        lambda r: (
            chat_summary_answer(r)
            if is_chat_summary_request(r)
            else by_message({"cello": [new_op("User plays the cello")]})(r)
        ),
        hold_only=is_chat_summary_request,
    )
    with LLMStub(responder=summary_gate) as stub:
        async with race_runtime(
            database_url,
            encoder,
            tmp_path / "state",
            llm_base_url=stub.base_url,
            MEMORY_CHAT_SUMMARY_TOKENS=1,
        ) as rt:
            turn = await queue_turn(
                rt, context=chat("u1", "c1"), message="I play the cello.", message_id="t1"
            )
            summary_gate.close()
            extraction = asyncio.create_task(run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH))
            await summary_gate.wait_arrived(2)  # the extraction, then the summary (held)
            if racing == "chat_deletion":
                operation = memory_flow.forget_chat(rt, chat_ids=["c1"], actor="openwebui")
            else:
                cursor = await db_conn.execute("SELECT id FROM memories")
                (fact,) = await cursor.fetchone() or (None,)
                operation = memory_flow.forget_for_user(rt, user_id="u1", memory_id=fact)
            await _finishes_while_held(operation, extraction)
            summary_gate.open()
            await extraction
            await rt.jobs.close_async()
    if racing == "chat_deletion":
        # the Personal fact stays (a chat's deletion forgets its Chat Memory only)
        assert await memory_rows(db_conn) == [("u1", "User plays the cello", "active", 1)]
    else:
        assert await memory_rows(db_conn) == [("u1", "", "deleted", 2)]
        assert not [t for t in await event_texts(db_conn) if "cello" in t]
    cursor = await db_conn.execute("SELECT count(*) FROM chat_summaries")
    assert await cursor.fetchone() == (0,)


async def test_no_connection_transaction_or_lock_is_held_while_the_llm_answers(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """Four extractions (the test pool's every connection, overflow included) hang in their
    LLM calls; meanwhile no pooled connection is checked out, no transaction is open, no
    advisory or row lock is held, and another user's inlet is answered."""
    gate.responder = by_message({"cello": [new_op("User plays the cello")]})
    await seed(rt, user_id="u9", content="User plays the cello in an orchestra")
    ids = [
        await queue_turn(
            rt, context=chat(f"u{i}", f"c{i}"), message="I play the cello.", message_id="t"
        )
        for i in range(4)
    ]
    gate.close()
    tasks = [asyncio.create_task(run_extraction(rt, turn_id=i, mode=RunMode.FLUSH)) for i in ids]
    await gate.wait_arrived(4)
    pool: Any = rt.db.engine.sync_engine.pool
    assert pool.checkedout() == 0
    cursor = await db_conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND xact_start IS NOT NULL AND pid <> pg_backend_pid()"
    )
    assert await cursor.fetchone() == (0,)
    cursor = await db_conn.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE a.datname = current_database() AND l.pid <> pg_backend_pid() "
        "AND l.locktype IN ('advisory', 'tuple', 'transactionid')"
    )
    assert await cursor.fetchone() == (0,)
    result = await asyncio.wait_for(
        context_flow.recall(
            rt, chat=chat("u9", "c9"), message="Which instrument?", budget_tokens=None, now=None
        ),
        timeout=30,
    )
    assert "User plays the cello in an orchestra" in result.block
    gate.open()
    await asyncio.gather(*tasks)
    assert await turn_rows(db_conn) == [("done", 1)] * 4


# --- item 2: concurrent updates of one shared memory -----------------------------------------


async def test_two_concurrent_updates_of_a_shared_memory_leave_one_successor(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """Two members of a project correct the same Project Memory at the same moment: the
    first answer applied wins, the other is asked again with the new version and applies on
    top of it (before, its UPDATE was dropped: a lost correction, issue 27) — one successor
    each, never two of one version."""
    gate.responder = by_message(
        {
            day: [new_op(f"Project deploys on {day}", op="UPDATE", ref="m1", bank="project")]
            for day in ("Mondays", "Tuesdays")
        }
    )
    await seed(rt, user_id="u1", content="Project deploys on Fridays", folder_id="f1")
    first = await queue_turn(
        rt,
        context=chat("u1", "c1", folder_id="f1"),
        message="We deploy on Mondays now.",
        message_id="t1",
    )
    second = await queue_turn(
        rt,
        context=chat("u2", "c2", folder_id="f1"),
        message="We deploy on Tuesdays now.",
        message_id="t2",
    )
    gate.close()
    one = asyncio.create_task(run_extraction(rt, turn_id=first, mode=RunMode.FLUSH))
    two = asyncio.create_task(run_extraction(rt, turn_id=second, mode=RunMode.FLUSH))
    await gate.wait_arrived(2)
    dropped = _dropped("target_changed")
    gate.open()
    await asyncio.gather(one, two)
    rows = await memory_rows(db_conn)
    assert rows[0] == ("f1", "Project deploys on Fridays", "superseded", 2)
    assert [r[2:] for r in rows[1:]] == [("superseded", 2), ("active", 1)]
    assert {r[1] for r in rows[1:]} == {"Project deploys on Mondays", "Project deploys on Tuesdays"}
    assert sorted(await turn_rows(db_conn)) == [("done", 1), ("done", 1)]
    assert _dropped("target_changed") - dropped == 0
    found = await integrity(db_conn, forgotten_texts=[])
    assert found.double_successors == 0


async def test_two_jobs_holding_the_same_batch_extract_each_turn_once(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """Another extraction of the same chat runs meanwhile: one memory, the turn done once."""
    gate.responder = by_message({"cello": [new_op("User plays the cello")]})
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="I play the cello.", message_id="t1"
    )
    gate.close()
    jobs = [
        asyncio.create_task(run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)) for _ in range(2)
    ]
    await gate.wait_arrived(1)
    gate.open()
    await asyncio.gather(*jobs)
    assert await memory_rows(db_conn) == [("u1", "User plays the cello", "active", 1)]
    assert await turn_rows(db_conn) == [("done", 1)]


# --- item 4 (apply time): a restated fact is not deleted -------------------------------------


async def test_a_delete_of_a_fact_restated_in_the_same_batch_keeps_the_memory(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """The answer restates the memory and deletes it: the restatement wins, one memory stays."""
    gate.responder = by_message(
        {"tennis": [new_op("User plays tennis"), new_op("", op="DELETE", ref="m1")]}
    )
    await seed(rt, user_id="u1", content="User plays tennis")
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="Yes, I still play tennis.", message_id="t1"
    )
    dropped = _dropped("restated")
    await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
    rows = await memory_rows(db_conn)
    assert [(c, s) for _, c, s, _ in rows] == [("User plays tennis", "active")]
    assert _dropped("restated") - dropped == 1


async def test_a_fact_deleted_by_a_later_message_of_the_batch_is_archived(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """Said, then taken back later in the same batch: the DELETE of the later message stands."""
    gate.responder = by_message(
        {
            "still play": [new_op("User plays tennis")],
            "gave up": [new_op("", op="DELETE", ref="m1")],
        }
    )
    await seed(rt, user_id="u1", content="User plays tennis")
    await queue_turn(rt, context=chat("u1", "c1"), message="I still play tennis.", message_id="t1")
    last = await queue_turn(
        rt, context=chat("u1", "c1"), message="Actually I gave up tennis.", message_id="t2"
    )
    await run_extraction(rt, turn_id=last, mode=RunMode.FLUSH)
    rows = await memory_rows(db_conn)
    assert [(c, s) for _, c, s, _ in rows] == [("User plays tennis", "archived")]


# --- item 13: unknown ids from the LLM -----------------------------------------------------


async def test_an_update_of_a_memory_never_shown_is_refused_not_stored_as_new(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection, caplog: pytest.LogCaptureFixture
) -> None:
    gate.responder = by_message({"Rome": [new_op("User lives in Rome", op="UPDATE", ref="m7")]})
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="I live in Rome now.", message_id="t1"
    )
    dropped = _dropped("unknown_target")
    with caplog.at_level(logging.WARNING, logger="service.flows.extraction"):
        await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
    assert await memory_rows(db_conn) == []
    assert await turn_rows(db_conn) == [("done", 0)]
    assert _dropped("unknown_target") - dropped == 1
    assert [r.getMessage() for r in caplog.records if "never shown" in r.getMessage()] == [
        "extraction refused UPDATE of m7: the LLM was never shown that memory"
    ]


async def test_a_delete_of_an_unknown_memory_is_refused_with_a_trace(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection, caplog: pytest.LogCaptureFixture
) -> None:
    gate.responder = by_message({"tennis": [new_op("", op="DELETE", ref="m3")]})
    await seed(rt, user_id="u1", content="User plays tennis")
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="I gave up tennis.", message_id="t1"
    )
    dropped = _dropped("unknown_target")
    with caplog.at_level(logging.WARNING, logger="service.flows.extraction"):
        await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
    assert await memory_rows(db_conn) == [("u1", "User plays tennis", "active", 1)]
    assert _dropped("unknown_target") - dropped == 1
    assert [r.getMessage() for r in caplog.records if "never shown" in r.getMessage()] == [
        "extraction refused DELETE of m3: the LLM was never shown that memory"
    ]


async def test_an_edit_landing_while_an_answer_replaces_the_memory_is_refused_not_half_applied(
    rt: Runtime, database_url: str, db_conn: psycopg.AsyncConnection
) -> None:
    """Found by the random race run: an extraction's write transaction supersedes the memory
    while an edit of it is under way. The edit waits for the row, then finds it replaced and
    answers not found; it never rewrites a superseded row."""
    paris = await seed(rt, user_id="u1", content=PARIS)
    async with await psycopg.AsyncConnection.connect(database_url) as writer:
        await writer.execute("SELECT 1 FROM memories WHERE id = %s FOR UPDATE", [paris.id])
        edit = asyncio.ensure_future(
            memory_flow.edit_for_user(
                rt,
                user_id="u1",
                memory_id=paris.id,
                content="User lives in Lyon",
                bank=None,
                tags=None,
            )
        )

        async def edit_waits() -> bool:
            row = await (
                await db_conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
            ).fetchone()
            return edit.done() or bool(row and row[0])

        await wait_until(edit_waits, timeout_s=30, what="the edit to wait for the row")
        await writer.execute(
            "UPDATE memories SET status = 'superseded', version = version + 1 WHERE id = %s",
            [paris.id],
        )
        await writer.commit()
    with pytest.raises(MemoryNotFound):
        await edit
    assert await memory_rows(db_conn) == [("u1", PARIS, "superseded", 2)]


# --- claims: a batch is claimed, never locked, and never stranded by its claim --------------


async def test_a_job_whose_llm_call_fails_releases_its_claim_and_the_retry_extracts_at_once(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    def down(_: dict[str, Any]) -> str:
        raise ConnectionError("the LLM is down")

    gate.responder = down
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="I play the cello.", message_id="t1"
    )
    with pytest.raises(LLMUnavailable):
        await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
    cursor = await db_conn.execute("SELECT status, claimed_until FROM turns")
    assert await cursor.fetchall() == [("queued", None)]
    gate.responder = by_message({"cello": [new_op("User plays the cello")]})
    outcome = await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
    assert (outcome.status, outcome.written) == ("done", 1)
    assert await turn_rows(db_conn) == [("done", 1)]


async def test_claims_left_by_a_killed_worker_are_cleared_when_the_service_starts(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """A worker killed during the LLM call leaves its batch claimed; at start-up the claims
    go, so the re-queued job extracts the turn instead of waiting for the claim to run out."""
    gate.responder = by_message({"cello": [new_op("User plays the cello")]})
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="I play the cello.", message_id="t1"
    )
    await db_conn.execute("UPDATE turns SET claimed_until = now() + interval '1 hour'")
    skipped = await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
    assert skipped.status == "already_done"  # claimed: left to its (dead) claimer
    assert await requeue_waiting_turns(rt) == 1
    cursor = await db_conn.execute("SELECT claimed_until FROM turns")
    assert await cursor.fetchall() == [(None,)]
    outcome = await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
    assert (outcome.status, outcome.written) == ("done", 1)


async def test_a_retried_job_takes_the_turns_its_failed_attempt_left_claimed(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """The database went away before the failed attempt could release its claim: the retry
    (procrastinate's next attempt) extracts the turn instead of leaving it to the claim."""
    gate.responder = by_message({"cello": [new_op("User plays the cello")]})
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="I play the cello.", message_id="t1"
    )
    await db_conn.execute("UPDATE turns SET claimed_until = now() + interval '1 hour'")
    outcome = await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH, ignore_claims=True)
    assert (outcome.status, outcome.written) == ("done", 1)
    assert await turn_rows(db_conn) == [("done", 1)]
