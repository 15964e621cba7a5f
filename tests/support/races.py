"""Helpers of the race tests: turns queued in-process, memories seeded, rows read back, and
the integrity figures every interleaving must keep at 0.

The tests call the flows directly on a Runtime (`tests/support/runtimes.py`), so they can
start an extraction as a task, hold it inside its LLM call (`tests/support/llm_gate.py`) and
run a forget, an edit, a deletion or another extraction at exactly that moment.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from service.core.records import Bank, ChatContext, ChatKind, Memory, OwnerKind, Scope
from service.embeddings.encoder import Encoder
from service.flows import commands
from service.flows import memories as memory_flow
from service.flows.runtime import Runtime
from service.flows.turns import chat_to_json
from service.storage import turns
from tests.support.runtimes import runtime_factory

__all__ = [
    "Integrity",
    "chat",
    "forget_all",
    "integrity",
    "memory_rows",
    "queue_turn",
    "race_runtime",
    "seed",
    "turn_rows",
]


@asynccontextmanager
async def race_runtime(
    database_url: str, encoder: Encoder, state_dir: Path, *, llm_base_url: str, **settings: Any
) -> AsyncIterator[Runtime]:
    """A Runtime whose job queue is open, talking to the stand-in LLM at `llm_base_url`: one
    extraction per turn, and LLM calls that may stay held for up to a minute.

    Args:
        settings: more settings by alias (e.g. MEMORY_CHAT_SUMMARY_TOKENS=1; a
            MEMORY_BATCH_MESSAGES given here replaces the default of 1).
    """
    async with runtime_factory(
        database_url,
        encoder,
        state_dir,
        LLM_BASE_URL=llm_base_url,
        LLM_MODEL="stub-model",
        LLM_TIMEOUT_S=60,
        **{"MEMORY_BATCH_MESSAGES": 1, **settings},
    ) as build:
        runtime = build()
        async with runtime.jobs.open_async():
            yield runtime


def chat(user_id: str, chat_id: str, *, folder_id: str | None = None) -> ChatContext:
    """A saved chat of `user_id` (in the project `folder_id`, when given)."""
    return ChatContext(
        user_id=user_id,
        kind=ChatKind.SAVED,
        chat_id=chat_id,
        user_name=user_id.title(),
        folder_id=folder_id,
    )


async def queue_turn(rt: Runtime, *, context: ChatContext, message: str, message_id: str) -> int:
    """Store a waiting turn as `POST /v1/turns` does (no job queued); returns its id."""
    async with rt.db.unit_of_work() as session:
        turn_id = await turns.accept(
            session,
            chat_id=context.chat_id,
            user_message_id=message_id,
            user_id=context.user_id,
            payload={
                "chat": chat_to_json(context),
                "occurred_at": datetime.now(UTC).isoformat(),
                "texts": {"user": message, "assistant": "Noted.", "history": []},
            },
            message_hash=f"{context.chat_id}:{message_id}",
            estimated_tokens=len(message.split()) * 2,
        )
    assert turn_id is not None
    return turn_id


async def seed(rt: Runtime, *, user_id: str, content: str, folder_id: str | None = None) -> Memory:
    """A memory the user wrote: Personal, or the Project Memory of `folder_id`."""
    cell = (
        Scope(OwnerKind.FOLDER, folder_id, Bank.PROJECT)
        if folder_id
        else Scope(OwnerKind.USER, user_id, Bank.PERSONAL)
    )
    return await memory_flow.add(rt, cell=cell, content=content, tags=(), actor=f"user:{user_id}")


async def forget_all(rt: Runtime, *, user_id: str) -> str:
    """`/memory forget all`, confirmed with the code the first answer asks for."""
    context = chat(user_id, f"commands-{user_id}")
    _, first = await commands.run_command(rt, chat=context, command_text="/memory forget all")
    code = re.search(r"`/memory forget all (\S+)`", first)
    if code is None:
        return first
    _, answer = await commands.run_command(
        rt, chat=context, command_text=f"/memory forget all {code.group(1)}"
    )
    return answer


async def memory_rows(conn: psycopg.AsyncConnection) -> list[tuple[str, str, str, int]]:
    """(owner id, content, status, version) of every memory row, oldest first."""
    cursor = await conn.execute(
        "SELECT owner_id, content, status, version FROM memories ORDER BY seq"
    )
    return [(str(o), str(c), str(s), int(v)) for o, c, s, v in await cursor.fetchall()]


async def turn_rows(conn: psycopg.AsyncConnection) -> list[tuple[str, int]]:
    """(status, memories written) of every turn, oldest first."""
    cursor = await conn.execute("SELECT status, memories_written FROM turns ORDER BY id")
    return [(str(s), int(n)) for s, n in await cursor.fetchall()]


async def event_texts(conn: psycopg.AsyncConnection) -> list[str]:
    """The before and after payloads of every audit event, as JSON text."""
    cursor = await conn.execute("SELECT before, after FROM memory_events ORDER BY id")
    return [json.dumps([b, a]) for b, a in await cursor.fetchall()]


@dataclass(frozen=True, slots=True)
class Integrity:
    """What an interleaving must never leave behind (every field must be 0)."""

    resurrected: int  #: forgotten memories not deleted any more, or with a live successor,
    #: or forgotten text found in a memory or an audit payload
    double_successors: int  #: memories superseded twice (two successors of one version)
    stuck_turns: int  #: turns still queued after every job finished

    def as_dict(self) -> dict[str, int]:
        return {
            "resurrected": self.resurrected,
            "double_successors": self.double_successors,
            "stuck_turns": self.stuck_turns,
        }


async def integrity(conn: psycopg.AsyncConnection, *, forgotten_texts: list[str]) -> Integrity:
    """Count the integrity violations in the database.

    Args:
        forgotten_texts: the texts of memories the run forgot (they may appear nowhere).
    """
    forgotten_ids: Any = await (
        await conn.execute("SELECT DISTINCT memory_id FROM memory_events WHERE action = 'forget'")
    ).fetchall()
    ids = [r[0] for r in forgotten_ids]
    not_deleted = await _count(
        conn, "SELECT count(*) FROM memories WHERE id = ANY(%s) AND status <> 'deleted'", [ids]
    )
    # a successor written after its predecessor was forgotten (before it: the user forgot
    # an old version, and the newer fact rightly stays)
    live_successors = await _count(
        conn,
        "SELECT count(*) FROM memories m JOIN memories s ON s.id = m.superseded_by "
        "JOIN memory_events f ON f.memory_id = m.id AND f.action = 'forget' "
        "JOIN memory_events c ON c.memory_id = s.id AND c.action = 'create' "
        "WHERE m.id = ANY(%s) AND s.status = 'active' AND c.id > f.id",
        [ids],
    )
    texts = 0
    for text in forgotten_texts:
        texts += await _count(
            conn, "SELECT count(*) FROM memories WHERE content = %s", [text]
        ) + await _count(
            conn,
            "SELECT count(*) FROM memory_events WHERE strpos(coalesce(before::text, '') "
            "|| coalesce(after::text, ''), %s) > 0",
            [json.dumps(text)[1:-1]],
        )
    double = await _count(
        conn,
        "SELECT count(*) FROM (SELECT m.id FROM memories m "
        "JOIN memory_events e ON e.memory_id = m.id AND e.action = 'supersede' "
        "GROUP BY m.id HAVING count(*) > 1) twice",
        [],
    )
    stuck = await _count(conn, "SELECT count(*) FROM turns WHERE status = 'queued'", [])
    return Integrity(not_deleted + live_successors + texts, double, stuck)


async def _count(conn: psycopg.AsyncConnection, sql: str, params: list[Any]) -> int:
    row = await (await conn.execute(sql, params)).fetchone()
    return int(row[0]) if row else 0
