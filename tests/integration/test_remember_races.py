"""A "Remember this" click raced by forget, forget all, chat deletion and a second click
while its LLM call runs (tests/support/llm_gate.py holds the call): the forget wins, a
deleted chat gets nothing, two clicks store once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.core.records import ChatContext, ChatKind
from service.core.remember import Outcome, Role
from service.embeddings.encoder import Encoder
from service.flows import memories as memory_flow
from service.flows import remember as remember_flow
from service.flows.runtime import Runtime
from service.storage import remember as remember_store
from testkit.extraction_replies import by_message, new_op
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until_async as wait_until
from tests.support.llm_gate import LLMGate
from tests.support.races import forget_all, memory_rows, race_runtime, seed

PARIS = "User lives in Paris"
CHAT = ChatContext(user_id="u1", kind=ChatKind.SAVED, chat_id="c1", user_name="Ada")


@pytest.fixture
def gate() -> LLMGate:
    return LLMGate(by_message({"Paris": [new_op(PARIS)], "bees": [new_op("User keeps bees")]}))


@pytest.fixture
def llm(gate: LLMGate) -> Iterator[LLMStub]:
    with LLMStub(responder=gate) as stub:
        yield stub
    gate.open()


@pytest.fixture
async def rt(
    database_url: str, encoder: Encoder, tmp_path: Path, llm: LLMStub
) -> AsyncIterator[Runtime]:
    # a click is never batched, so race_runtime's one-turn batches change nothing here
    async with race_runtime(
        database_url, encoder, tmp_path / "state", llm_base_url=llm.base_url
    ) as runtime:  # its job queue is open: forget all queues profile refreshes
        yield runtime


async def _held_click(
    rt: Runtime, gate: LLMGate, text: str, *, message_id: str = "m1"
) -> asyncio.Task[Any]:
    """A click started and waiting inside its LLM call."""
    gate.close()
    arrived = gate.arrived
    task = asyncio.create_task(
        remember_flow.remember(
            rt, chat=CHAT, message_id=message_id, role=Role.USER, content=text, author_id="u1"
        )
    )
    await gate.wait_arrived(arrived + 1)
    return task


async def _while_held(operation: Any, click: asyncio.Task[Any]) -> Any:
    """Run `operation` to its end while the click still waits (a forget never waits for an
    LLM call)."""
    task = asyncio.ensure_future(operation)
    await wait_until(lambda: task.done() or click.done(), timeout_s=30, what="the operation")
    assert not click.done(), "the operation waited until the click's LLM call ended"
    return await task


async def _requests(rt: Runtime) -> int:
    async with rt.db.unit_of_work() as session:
        return await remember_store.running(session)


async def test_forget_all_during_the_call_leaves_nothing_written(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    await seed(rt, user_id="u1", content="User keeps goats")
    click = await _held_click(rt, gate, "I live in Paris")
    answer = await _while_held(forget_all(rt, user_id="u1"), click)
    gate.release()
    result = await click

    assert answer.startswith("Forgot 1 memory")
    assert result.outcome is Outcome.DISCARDED
    assert result.text == (
        "Not remembered: you forgot all your memories while I was reading this message"
    )
    assert await memory_rows(db_conn) == [("u1", "", "deleted", 2)]
    assert await _requests(rt) == 0


async def test_a_chat_deleted_during_the_call_gets_nothing(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    click = await _held_click(rt, gate, "I live in Paris")
    await _while_held(memory_flow.forget_chat(rt, chat_ids=["c1"], actor="openwebui"), click)
    gate.release()
    result = await click

    assert result.outcome is Outcome.DISCARDED
    assert result.text == "Not remembered: this chat was deleted while I was reading the message"
    assert await memory_rows(db_conn) == []


async def test_a_deletion_of_another_chat_does_not_stop_the_click(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    click = await _held_click(rt, gate, "I live in Paris")
    await _while_held(memory_flow.forget_chat(rt, chat_ids=["c2"], actor="openwebui"), click)
    gate.release()
    result = await click

    assert result.outcome is Outcome.STORED
    assert await memory_rows(db_conn) == [("u1", PARIS, "active", 1)]


async def test_a_shown_memory_forgotten_during_the_call_is_not_written_again(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """The LLM was shown "User lives in Paris"; the user forgets it meanwhile; the answer
    restating it is dropped (forget wins)."""
    paris = await seed(rt, user_id="u1", content=PARIS)
    click = await _held_click(rt, gate, "I live in Paris")
    await _while_held(memory_flow.forget_for_user(rt, user_id="u1", memory_id=paris.id), click)
    gate.release()
    result = await click

    assert result.outcome is Outcome.FORGOTTEN
    assert result.text == "Not remembered: you forgot this while I was reading the message"
    assert await memory_rows(db_conn) == [("u1", "", "deleted", 2)]


async def test_a_memory_of_this_message_forgotten_during_a_second_click_stays_forgotten(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """Two clicks on one message both wait for the LLM; the first writes, the user forgets
    that memory, then the second's answer comes: nothing comes back."""
    first = await _held_click(rt, gate, "I keep bees")
    second = await _held_click(rt, gate, "I keep bees")
    gate.release()  # one of the two calls answers (whichever the gate lets through)
    done, _ = await asyncio.wait({first, second}, return_when=asyncio.FIRST_COMPLETED)
    stored = done.pop()
    later = second if stored is first else first
    assert stored.result().outcome is Outcome.STORED
    await memory_flow.forget_for_user(rt, user_id="u1", memory_id=stored.result().memories[0].id)
    gate.release()
    result = await later

    assert result.outcome is Outcome.FORGOTTEN
    assert await memory_rows(db_conn) == [("u1", "", "deleted", 2)]


async def test_two_clicks_at_once_store_one_memory(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    first = await _held_click(rt, gate, "I keep bees")
    second = await _held_click(rt, gate, "I keep bees")
    gate.open()
    outcomes = sorted([(await first).outcome.value, (await second).outcome.value])

    assert outcomes == ["already", "stored"]
    assert await memory_rows(db_conn) == [("u1", "User keeps bees", "active", 1)]
    assert await _requests(rt) == 0
