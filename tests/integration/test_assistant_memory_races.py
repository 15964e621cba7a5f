"""Assistant Memory raced: a turn's facts land where its own turn said (an assistant chat or
not) whatever arrives while the LLM answers, and a forget (one memory or all of the
assistant's) wins over an extraction held inside its LLM call (DESIGN §5.6).

Each race holds an extraction inside its LLM call (`tests/support/llm_gate.py`), runs the
racing operation, then lets the answer through and checks the exact rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.core import assistants
from service.core import commands as text
from service.core.records import Bank, ChatContext, Memory, OwnerKind, Scope
from service.embeddings.encoder import Encoder
from service.flows import commands
from service.flows import memories as memory_flow
from service.flows.extraction import RunMode, run_extraction
from service.flows.runtime import Runtime
from testkit.extraction_replies import by_message, new_op
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until_async as wait_until
from tests.support.llm_gate import LLMGate
from tests.support.races import chat, memory_rows, queue_turn, race_runtime, seed, turn_rows

CODER = '["u1","coder"]'
RUST = "User writes Rust at work"
REX = "User has a dog named Rex"
HELIX = "User uses helix"
VIM = "User uses vim"

REPLIES = {
    "Rust": [new_op(RUST, bank="personal")],
    "Rex": [new_op(REX, bank="personal")],
    "helix": [new_op(HELIX, op="UPDATE", ref="m1")],
}


def coder_chat(chat_id: str = "c1") -> ChatContext:
    return dataclasses.replace(
        chat("u1", chat_id), assistant_id="coder", assistant_name="Coding Helper"
    )


@pytest.fixture
def gate() -> LLMGate:
    return LLMGate(by_message(REPLIES))


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


async def _seed_coder(rt: Runtime, content: str) -> Memory:
    cell = Scope(OwnerKind.ASSISTANT, assistants.owner_id("u1", "coder"), Bank.ASSISTANT)
    return await memory_flow.add(rt, cell=cell, content=content, tags=(), actor="user:u1")


async def _held_extraction(rt: Runtime, gate: LLMGate, turn_id: int) -> asyncio.Task[Any]:
    gate.close()
    arrived = gate.arrived
    task = asyncio.create_task(run_extraction(rt, turn_id=turn_id, mode=RunMode.FLUSH))
    await gate.wait_arrived(arrived + 1)
    return task


async def _while_held(operation: Any, extraction: asyncio.Task[Any]) -> Any:
    """Run `operation` to its end while `extraction` still waits for its LLM answer."""
    task = asyncio.ensure_future(operation)
    await wait_until(lambda: task.done() or extraction.done(), timeout_s=30, what="the operation")
    assert not extraction.done(), "the operation waited for the extraction's LLM call"
    return await task


async def test_a_turn_is_written_with_the_scope_of_its_own_turn_while_the_next_one_differs(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    """The admin unmarks the assistant (or the user switches model in the chat) while the
    assistant turn's extraction waits for the LLM: that turn still writes only the
    assistant's memory, and the next, ordinary turn of the same chat only Personal."""
    first = await queue_turn(
        rt, context=coder_chat(), message="I write Rust at work.", message_id="t1"
    )
    extraction = await _held_extraction(rt, gate, first)
    second = await queue_turn(
        rt, context=chat("u1", "c1"), message="I have a dog named Rex.", message_id="t2"
    )
    gate.open()
    await extraction
    await run_extraction(rt, turn_id=second, mode=RunMode.FLUSH)
    assert await memory_rows(db_conn) == [(CODER, RUST, "active", 1), ("u1", REX, "active", 1)]
    assert await turn_rows(db_conn) == [("done", 1), ("done", 1)]


async def test_waiting_turns_of_an_assistant_and_an_ordinary_model_are_never_one_batch(
    database_url: str,
    encoder: Encoder,
    tmp_path: Path,
    llm: LLMStub,
    db_conn: psycopg.AsyncConnection,
) -> None:
    """Batching closes a batch at a change of context: three waiting turns of one chat,
    assistant / ordinary / assistant, are three LLM calls, each written to its own cell."""
    async with race_runtime(
        database_url,
        encoder,
        tmp_path / "state",
        llm_base_url=llm.base_url,
        MEMORY_BATCH_MESSAGES="10",
    ) as rt:
        await queue_turn(rt, context=coder_chat(), message="I write Rust at work.", message_id="t1")
        await queue_turn(
            rt, context=chat("u1", "c1"), message="I have a dog named Rex.", message_id="t2"
        )
        last = await queue_turn(
            rt, context=coder_chat(), message="Also: I write Rust at work.", message_id="t3"
        )
        calls = len(llm.requests)
        await run_extraction(rt, turn_id=last, mode=RunMode.FLUSH)
        prompts = [r["messages"][-1]["content"] for r in llm.requests[calls:]]
    assert len(prompts) == 3
    assert ["Rex" in p for p in prompts] == [False, True, False]
    rows = await memory_rows(db_conn)
    assert rows == [(CODER, RUST, "active", 2), ("u1", REX, "active", 1)]  # t3 confirmed t1


async def test_a_forget_in_the_assistants_memory_wins_over_an_extraction_held_in_its_call(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    vim = await _seed_coder(rt, VIM)
    turn = await queue_turn(
        rt, context=coder_chat(), message="I switched to helix.", message_id="t1"
    )
    extraction = await _held_extraction(rt, gate, turn)
    _, answer = await _while_held(
        commands.run_command(
            rt, chat=coder_chat("c9"), command_text=f"/memory forget {text.encode_id(vim.seq)}"
        ),
        extraction,
    )
    assert answer.startswith(f"Forgotten `{text.encode_id(vim.seq)}` everywhere.")
    gate.release()
    await extraction
    assert await memory_rows(db_conn) == [(CODER, "", "deleted", 2)]
    assert await turn_rows(db_conn) == [("done", 0)]


async def test_forget_all_of_an_assistant_while_its_extraction_answers_writes_nothing_back(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    await _seed_coder(rt, VIM)
    await seed(rt, user_id="u1", content="User keeps bees")
    turn = await queue_turn(
        rt, context=coder_chat(), message="I write Rust at work.", message_id="t1"
    )
    extraction = await _held_extraction(rt, gate, turn)
    context = coder_chat("c9")
    _, first = await _while_held(
        commands.run_command(rt, chat=context, command_text="/memory forget all"), extraction
    )
    code = re.search(r"`/memory forget all (\S+)`", first)
    assert code is not None, first
    _, done = await _while_held(
        commands.run_command(rt, chat=context, command_text=f"/memory forget all {code.group(1)}"),
        extraction,
    )
    assert done == (
        "Forgot 1 memory of Assistant Memory of Coding Helper. Your other memories were kept."
    )
    gate.release()
    await extraction
    assert await memory_rows(db_conn) == [
        (CODER, "", "deleted", 2),
        ("u1", "User keeps bees", "active", 1),
    ]
    assert await turn_rows(db_conn) == [("discarded", 0)]
