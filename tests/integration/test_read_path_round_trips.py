"""The inlet's round trips: the profile and the core memories come from one statement, and a
warm context call issues no more statements than it needs. Real PostgreSQL and model; the
statements are counted with a SQLAlchemy cursor event, never timed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from service.core import privacy
from service.core.records import ChatContext, ChatKind
from service.embeddings.encoder import Encoder
from service.flows import commands, context
from service.flows.runtime import Runtime
from service.storage import memories, profiles
from tests.support.runtimes import RuntimeFactory, runtime_factory

CHAT = ChatContext(user_id="rosa", kind=ChatKind.SAVED, chat_id="trips")
FACTS = (
    "User lands in Lima on June 3.",
    "User is allergic to peanuts.",
    "User plays the cello on Sundays.",
)


@pytest.fixture
async def runtime(
    database_url: str, encoder: Encoder, tmp_path: Path
) -> AsyncIterator[RuntimeFactory]:
    async with runtime_factory(database_url, encoder, tmp_path) as build:
        yield build


@contextmanager
def statements(rt: Runtime) -> Iterator[list[str]]:
    """Every statement the runtime's engine sends while the block runs, in order."""
    sent: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(" ".join(statement.split()))

    engine = rt.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", before)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", before)


async def _remember(rt: Runtime) -> None:
    async with rt.jobs.open_async():
        for fact in FACTS:
            _, added = await commands.run_command(rt, chat=CHAT, command_text=f"/memory add {fact}")
            assert added.startswith("Remembered in Personal:")


async def _context_call(rt: Runtime, message: str) -> context.ContextResult:
    result = await context.build_context(
        rt, chat=CHAT, message=message, budget_tokens=None, now=None
    )
    if context._pending:  # the call's `/memory why` record, written after the answer
        await asyncio.wait(set(context._pending))
    return result


async def test_profile_and_core_memories_are_one_statement(runtime: RuntimeFactory) -> None:
    rt = runtime()
    await _remember(rt)
    scope = privacy.read_scope(CHAT)
    async with rt.db.reads() as session:
        expected_core = await memories.core_memories(
            session, scope=scope, limit=rt.settings.core_max_items
        )
    assert sorted(m.content for m in expected_core) == sorted(FACTS)

    with statements(rt) as sent:
        found = await context._profile_or_core(rt, chat=CHAT, scope=scope)
    assert found == (None, expected_core)  # same memories, same order
    assert len(sent) == 1, sent

    async with rt.db.unit_of_work() as session:
        await profiles.put(
            session,
            profile=profiles.Profile(
                CHAT.user_id,
                "private",
                "Rosa is allergic to peanuts and plays the cello.",
                (uuid.uuid4(),),
                1,
                datetime.now(UTC),
            ),
        )
    with statements(rt) as sent:
        found = await context._profile_or_core(rt, chat=CHAT, scope=scope)
    assert found == ("Rosa is allergic to peanuts and plays the cello.", [])
    assert len(sent) == 1, sent


async def test_a_warm_context_call_reads_with_two_statements(runtime: RuntimeFactory) -> None:
    rt = runtime()
    await _remember(rt)
    first = await _context_call(rt, "When do I land in Lima?")  # warms the caches
    assert "User lands in Lima on June 3." in [m.memory.content for m in first.items]

    with statements(rt) as sent:
        result = await _context_call(rt, "Which day do I reach Lima?")
    assert "User lands in Lima on June 3." in [m.memory.content for m in result.items]
    # the memories' reads (the reminders' own check depends on the change listener, absent
    # here; the use record is a write): the candidates, and the profile with the core memories
    reads = [
        s
        for s in sent
        if s.startswith(("SELECT", "WITH")) and "UPDATE" not in s and "FROM reminders" not in s
    ]
    assert len(reads) == 2, [s[:90] for s in reads]
