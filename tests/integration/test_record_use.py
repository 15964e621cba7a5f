"""What a turn leaves behind: the injected memories' last use and the `/memory why` record,
written by one statement. Real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from service.core.records import Bank, Memory, OwnerKind, ReadScope, Scope, SourceKind
from service.storage import memories, user_state
from service.storage.db import Database

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database.connect(database_url)
    yield database
    await database.dispose()


async def _store(db: Database, contents: list[str]) -> list[Memory]:
    async with db.unit_of_work() as session:
        return [
            await memories.insert(
                session,
                owner_kind=OwnerKind.USER,
                owner_id="ana",
                bank=Bank.PERSONAL,
                content=content,
                tags=[],
                confidence=1.0,
                source_kind=SourceKind.MANUAL,
                source_chat_id=None,
                source_message_id=None,
                created_at=T0,
                embedding=None,
                embedding_model=None,
            )
            for content in contents
        ]


async def _last_used(db: Database, stored: list[Memory]) -> list[datetime | None]:
    scope = ReadScope((Scope(OwnerKind.USER, "ana", Bank.PERSONAL),))
    async with db.unit_of_work() as session:
        return [
            (await memories.get(session, scope=scope, memory_id=m.id)).last_used_at  # type: ignore[union-attr]
            for m in stored
        ]


async def test_a_chat_turn_records_last_use_and_what_was_injected(db: Database) -> None:
    stored = await _store(db, ["Ana keeps bees", "Ana plays the cello", "Ana lives in Porto"])
    items = [{"seq": stored[0].seq, "similarity": 0.91, "score": 0.8}]
    async with db.unit_of_work() as session:
        await user_state.record_use(
            session,
            user_id="ana",
            chat_id="c1",
            at=T0,
            memory_ids=[stored[0].id, stored[1].id],
            items=items,
        )
    assert await _last_used(db, stored) == [T0, T0, None]
    async with db.unit_of_work() as session:
        assert await user_state.last_injection(session, user_id="ana", chat_id="c1") == (T0, items)

    # the next turn of the same chat replaces the record; an earlier time never wins
    later = T0 + timedelta(minutes=5)
    async with db.unit_of_work() as session:
        await user_state.record_use(
            session, user_id="ana", chat_id="c1", at=later, memory_ids=[stored[1].id], items=[]
        )
        await user_state.record_use(
            session,
            user_id="ana",
            chat_id="c2",
            at=T0,
            memory_ids=[stored[1].id, stored[2].id],
            items=[],
        )
    assert await _last_used(db, stored) == [T0, later, T0]
    async with db.unit_of_work() as session:
        assert await user_state.last_injection(session, user_id="ana", chat_id="c1") == (later, [])


async def test_a_turn_outside_a_saved_chat_records_only_last_use(db: Database) -> None:
    stored = await _store(db, ["Ana keeps bees"])
    async with db.unit_of_work() as session:
        await user_state.record_use(
            session,
            user_id="ana",
            chat_id=None,
            at=T0,
            memory_ids=[stored[0].id],
            items=[{"seq": stored[0].seq}],
        )
    assert await _last_used(db, stored) == [T0]
    async with db.unit_of_work() as session:
        assert await user_state.last_injection(session, user_id="ana", chat_id=None) is None
