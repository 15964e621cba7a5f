"""A turn accepted before a single forget and extracted after it never writes the forgotten
memory again (DESIGN §5.6), while its other facts — a correction included — are stored.

Its LLM is never shown the forgotten memory (it is gone when the extraction reads), so the
forget leaves the turn a guard: the memory's vector and a fingerprint of keyed digests, no
text (service/core/forget_guard.py, migration 0015). Before the guards, such a turn wrote
the fact again (4 of 250 rounds of `make reliability`'s race interleavings).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from service import observability
from service.embeddings.encoder import Encoder
from service.flows import admin as admin_flow
from service.flows import memories as memory_flow
from service.flows.extraction import RunMode, run_extraction
from service.flows.runtime import Runtime
from service.storage import turns
from service.storage.admin import RequeueResult
from service.storage.turns import TurnStatus
from testkit.extraction_replies import by_message, new_op
from testkit.llm_stub import LLMStub
from tests.support.llm_gate import LLMGate
from tests.support.races import (
    chat,
    event_texts,
    forget_all,
    memory_rows,
    queue_turn,
    race_runtime,
    seed,
    turn_rows,
)

REX = "User has a dog named Rex"


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
    return float(observability.DROPPED_OPERATIONS.labels(reason=reason)._value.get())


async def _guard_rows(conn: psycopg.AsyncConnection) -> list[tuple[int, str, bool]]:
    """(turn id, fingerprint as JSON text, has a vector) of every guard, oldest first."""
    cursor = await conn.execute(
        "SELECT turn_id, fingerprint::text, embedding IS NOT NULL FROM forget_guards ORDER BY id"
    )
    return [(int(t), str(f), bool(v)) for t, f, v in await cursor.fetchall()]


def _active(rows: list[tuple[str, str, str, int]]) -> list[str]:
    return [content for _, content, status, _ in rows if status == "active"]


@pytest.mark.parametrize(
    "restated",
    [
        REX,  # word for word
        "User has a dog named Rex.",  # punctuation
        "The user has a dog named Rex",  # one word more
        "User owns a dog named Rex",  # a rewording (cosine ≥ 0.90, nearly the same words)
        "User has a dog called Rex",
        # in other words (the meaning check: all 5 were written back before it)
        "Rex is the user's dog",
        "The user's dog is called Rex",
        "The user owns Rex, a dog",
        "User is the owner of a dog, Rex",
        "User's pet dog goes by the name Rex",
    ],
)
async def test_a_turn_queued_before_a_forget_does_not_write_the_forgotten_fact_again(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection, restated: str
) -> None:
    gate.responder = by_message({"Rex": [new_op(restated)]})
    rex = await seed(rt, user_id="u1", content=REX)
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="Rex, my dog, loves the park.", message_id="t1"
    )
    dropped = _dropped("forgotten_content")
    assert await memory_flow.forget_for_user(rt, user_id="u1", memory_id=rex.id) == 1
    guards = await _guard_rows(db_conn)
    assert [(t, v) for t, _, v in guards] == [(turn, True)]
    await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)

    assert _active(await memory_rows(db_conn)) == []
    assert await turn_rows(db_conn) == [("done", 0)]
    assert _dropped("forgotten_content") == dropped + 1
    assert await _guard_rows(db_conn) == []  # gone with the turn's extraction
    assert not any("Rex" in text for text in await event_texts(db_conn))


@pytest.mark.parametrize(
    "other",
    [
        "User has a dog named Max",  # a correction: another name
        "User does not have a dog named Rex any more",  # a negation
        "User has 2 dogs named Rex",  # a number
        "User walks the dog every morning",  # another fact
    ],
)
async def test_a_different_fact_of_a_turn_queued_before_the_forget_is_stored(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection, other: str
) -> None:
    gate.responder = by_message({"dog": [new_op(other)]})
    rex = await seed(rt, user_id="u1", content=REX)
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="About my dog: it changed.", message_id="t1"
    )
    await memory_flow.forget_for_user(rt, user_id="u1", memory_id=rex.id)
    await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)

    assert _active(await memory_rows(db_conn)) == [other]
    assert await turn_rows(db_conn) == [("done", 1)]


async def test_the_fact_said_again_after_the_forget_is_stored(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """Only turns accepted before the forget are guarded: a later message is a new statement."""
    gate.responder = by_message({"Rex": [new_op(REX)]})
    rex = await seed(rt, user_id="u1", content=REX)
    await memory_flow.forget_for_user(rt, user_id="u1", memory_id=rex.id)
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="I do have a dog, Rex.", message_id="t1"
    )
    assert await _guard_rows(db_conn) == []
    await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)

    assert _active(await memory_rows(db_conn)) == [REX]


async def test_a_fingerprint_holds_no_word_of_the_forgotten_memory(
    rt: Runtime, db_conn: psycopg.AsyncConnection
) -> None:
    content = "User's sister Hanna moved to Lisbon in 2021"
    memory = await seed(rt, user_id="u1", content=content)
    await queue_turn(rt, context=chat("u1", "c1"), message="hello", message_id="t1")
    await memory_flow.forget_for_user(rt, user_id="u1", memory_id=memory.id)

    [(_, fingerprint, _)] = await _guard_rows(db_conn)
    stored = json.loads(fingerprint)
    assert sorted(stored) == ["content", "distinguishing", "negated", "text", "words"]
    # user, s, sister, hanna, moved, to, lisbon, in, 2021; Hanna, Lisbon and 2021 distinguish
    assert len(stored["words"]) == 9 and len(stored["distinguishing"]) == 3
    assert len(stored["content"]) == 5  # sister, hanna, moved, lisbon, 2021
    # every word of four letters or more is absent (shorter ones occur in any hex string)
    words = [w for w in content.casefold().replace("'", " ").split() if len(w) >= 4]
    assert words == ["user", "sister", "hanna", "moved", "lisbon", "2021"]
    assert [w for w in words if w in fingerprint.casefold()] == []


async def test_forgetting_a_successor_guards_its_earlier_versions_too(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """Paris was replaced by Berlin; forgetting Berlin forgets Paris with it, and a turn
    queued before that says "Paris" again writes nothing."""
    gate.responder = by_message(
        {
            "moved": [new_op("User lives in Berlin", op="UPDATE", ref="m1")],
            "Paris": [new_op("User lives in Paris")],
        }
    )
    await seed(rt, user_id="u1", content="User lives in Paris")
    first = await queue_turn(
        rt, context=chat("u1", "c1"), message="I moved to Berlin.", message_id="t1"
    )
    await run_extraction(rt, turn_id=first, mode=RunMode.FLUSH)
    [berlin], _ = await memory_flow.list_for_user(
        rt, user_id="u1", bank=None, folder_id=None, limit=10, offset=0
    )
    second = await queue_turn(
        rt, context=chat("u1", "c2"), message="Paris was lovely to live in.", message_id="t2"
    )
    assert await memory_flow.forget_for_user(rt, user_id="u1", memory_id=berlin.id) == 2
    assert [t for t, _, _ in await _guard_rows(db_conn)] == [second, second]
    await run_extraction(rt, turn_id=second, mode=RunMode.FLUSH)

    assert _active(await memory_rows(db_conn)) == []


async def test_a_forgotten_project_memory_guards_another_members_queued_turn(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    fact = "Project deadline is the end of March"
    gate.responder = by_message({"deadline": [new_op(fact, bank="project")]})
    memory = await seed(rt, user_id="u1", content=fact, folder_id="f1")
    theirs = await queue_turn(
        rt,
        context=chat("u2", "c2", folder_id="f1"),
        message="Reminder: the deadline is the end of March.",
        message_id="t1",
    )
    unrelated = await queue_turn(
        rt, context=chat("u3", "c3"), message="The deadline is near.", message_id="t1"
    )
    await memory_flow.forget_for_user(rt, user_id="u1", memory_id=memory.id, folder_id="f1")
    assert [t for t, _, _ in await _guard_rows(db_conn)] == [theirs]
    await run_extraction(rt, turn_id=theirs, mode=RunMode.FLUSH)

    assert _active(await memory_rows(db_conn)) == []
    assert unrelated  # u3's chat is in no folder: it could never write that memory


async def test_a_forget_while_the_turn_waits_for_its_llm_guards_it_as_well(
    database_url: str,
    encoder: Encoder,
    tmp_path: Path,
    gate: LLMGate,
    llm: LLMStub,
    db_conn: psycopg.AsyncConnection,
) -> None:
    """Held in its LLM call, never shown the memory (no neighbours are shown here): the
    forget lands during the call, and the answer restating it is dropped."""
    async with race_runtime(
        database_url,
        encoder,
        tmp_path / "state",
        llm_base_url=llm.base_url,
        MEMORY_EXTRACTION_NEIGHBOURS=0,
    ) as rt:
        gate.responder = by_message({"Rex": [new_op(REX)]})
        rex = await seed(rt, user_id="u1", content=REX)
        turn = await queue_turn(
            rt, context=chat("u1", "c1"), message="Rex, my dog, loves the park.", message_id="t1"
        )
        gate.close()
        arrived = gate.arrived
        task = asyncio.create_task(run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH))
        await gate.wait_arrived(arrived + 1)
        await memory_flow.forget_for_user(rt, user_id="u1", memory_id=rex.id)
        assert not task.done()
        gate.open()
        await task

    assert _active(await memory_rows(db_conn)) == []
    assert await _guard_rows(db_conn) == []


async def test_guards_go_when_their_turns_are_discarded_or_deleted(
    rt: Runtime, db_conn: psycopg.AsyncConnection
) -> None:
    rex = await seed(rt, user_id="u1", content=REX)
    await seed(rt, user_id="u1", content="User likes tea")
    await queue_turn(rt, context=chat("u1", "c1"), message="hello", message_id="t1")
    await memory_flow.forget_for_user(rt, user_id="u1", memory_id=rex.id)
    assert len(await _guard_rows(db_conn)) == 1
    await forget_all(rt, user_id="u1")  # discards the user's waiting turns
    assert await turn_rows(db_conn) == [("discarded", 0)]
    assert await _guard_rows(db_conn) == []

    other = await seed(rt, user_id="u2", content=REX)
    await queue_turn(rt, context=chat("u2", "c2"), message="hello", message_id="t1")
    await memory_flow.forget_for_user(rt, user_id="u2", memory_id=other.id)
    assert len(await _guard_rows(db_conn)) == 1
    await memory_flow.forget_user(rt, user_id="u2", actor="admin")
    assert await _guard_rows(db_conn) == []


async def test_a_failed_turn_retried_after_the_forget_is_guarded_too(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """A failed turn keeps its texts until an admin retries it: it keeps its guards as long."""
    gate.responder = by_message({"Rex": [new_op(REX), new_op("User's dog is five years old")]})
    rex = await seed(rt, user_id="u1", content=REX)
    turn = await queue_turn(
        rt, context=chat("u1", "c1"), message="Rex, my dog, is five.", message_id="t1"
    )
    async with rt.db.unit_of_work() as session:
        await turns.finish(session, turn_id=turn, status=TurnStatus.FAILED, error="LLM down")
    await memory_flow.forget_for_user(rt, user_id="u1", memory_id=rex.id)
    assert [t for t, _, _ in await _guard_rows(db_conn)] == [turn]
    assert await admin_flow.retry_turn(rt, turn_id=turn) is RequeueResult.REQUEUED
    await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)

    assert _active(await memory_rows(db_conn)) == ["User's dog is five years old"]
    assert await turn_rows(db_conn) == [("done", 1)]
    assert await _guard_rows(db_conn) == []
