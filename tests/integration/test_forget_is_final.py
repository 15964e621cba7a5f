"""Forget is final (issue 27, item 5): forgetting any version of a fact forgets the whole
fact, and nothing waiting on an LLM when the user forgets writes it back."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from service.embeddings.encoder import Encoder
from service.flows import commands
from service.flows import memories as memory_flow
from service.flows.extraction import RunMode, run_extraction
from service.flows.runtime import Runtime
from testkit.extraction_replies import by_message, new_op
from testkit.llm_stub import LLMStub
from tests.support.llm_gate import LLMGate
from tests.support.races import chat, forget_all, memory_rows, queue_turn, race_runtime, seed


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


async def _replaced(rt: Runtime, gate: LLMGate, *, updates: list[str]) -> list[str]:
    """Seed "User lives in Paris" and replace it by each of `updates` in turn (extraction's
    UPDATE); returns the ids of every version, oldest first."""
    first = await seed(rt, user_id="u1", content="User lives in Paris")
    ids = [str(first.id)]
    for n, text in enumerate(updates):
        gate.responder = by_message({f"move {n}": [new_op(text, op="UPDATE", ref="m1")]})
        turn = await queue_turn(
            rt, context=chat("u1", f"c{n}"), message=f"move {n}: I moved.", message_id=f"t{n}"
        )
        await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)
        [newest], _ = await memory_flow.list_for_user(
            rt, user_id="u1", bank=None, folder_id=None, limit=10, offset=0
        )
        assert newest.content == text
        ids.append(str(newest.id))
    return ids


@pytest.mark.parametrize("which", [0, 1, 2])
async def test_forgetting_any_version_forgets_the_whole_fact(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection, which: int
) -> None:
    """Before: forgetting Paris (already replaced by Berlin) answered "forgotten" and left
    Berlin active and injected; only the newest id forgot the whole chain."""
    ids = await _replaced(rt, gate, updates=["User lives in Berlin", "User lives in Rome"])
    count = await memory_flow.forget_for_user(rt, user_id="u1", memory_id=uuid.UUID(ids[which]))
    assert count == 3
    assert [(content, status) for _, content, status, _ in await memory_rows(db_conn)] == [
        ("", "deleted")
    ] * 3
    active, total = await memory_flow.list_for_user(
        rt, user_id="u1", bank=None, folder_id=None, limit=10, offset=0
    )
    assert (active, total) == ([], 0)


async def _pending_imports(conn: psycopg.AsyncConnection) -> int:
    row = await (await conn.execute("SELECT count(*) FROM pending_imports")).fetchone()
    return int(row[0]) if row else -1


async def _forget_everything(rt: Runtime, how: str) -> None:
    if how == "forget_all":
        assert (await forget_all(rt, user_id="u1")).startswith("Forgot")
    elif how == "user_deleted":
        await memory_flow.forget_user(rt, user_id="u1", actor="test")
    else:
        await memory_flow.forget_chat(rt, chat_ids=["c1"], actor="test")


@pytest.mark.parametrize("how", ["forget_all", "user_deleted", "chat_deleted"])
async def test_an_import_preview_waiting_on_the_llm_keeps_nothing_after_a_forget(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection, how: str
) -> None:
    """Before, the preview was kept when its LLM answer came and its code wrote it (each of
    the three, every time)."""
    gate.responder = by_message({"beehives": [new_op("User keeps two beehives")]})
    await seed(rt, user_id="u1", content="User likes green tea")
    gate.close()
    preview = asyncio.create_task(
        commands.run_command(
            rt, chat=chat("u1", "c1"), command_text="/memory import\nI keep two beehives"
        )
    )
    await gate.wait_arrived(1)
    await _forget_everything(rt, how)
    gate.open()
    _, answer = await preview
    assert answer.startswith("Nothing is kept to import: "), answer
    assert await _pending_imports(db_conn) == 0
    assert [c for _, c, s, _ in await memory_rows(db_conn) if s == "active"] == (
        ["User likes green tea"] if how == "chat_deleted" else []
    )


async def test_a_pending_import_pasted_in_a_deleted_chat_is_dropped(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    gate.responder = by_message({"beehives": [new_op("User keeps two beehives")]})
    _, answer = await commands.run_command(
        rt, chat=chat("u1", "c1"), command_text="/memory import\nI keep two beehives"
    )
    assert "I would add 1 memory" in answer
    assert await _pending_imports(db_conn) == 1
    await memory_flow.forget_chat(rt, chat_ids=["c2"], actor="test")  # another chat
    assert await _pending_imports(db_conn) == 1
    await memory_flow.forget_chat(rt, chat_ids=["c1"], actor="test")
    assert await _pending_imports(db_conn) == 0
