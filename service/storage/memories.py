"""Memory rows: insert, get, listing, core memories and lifecycle changes (supersede,
confidence, status, edits, tombstones) under the row locks every writer shares.

Every read takes a required `scope`; the scope filter is part of the SQL statement
(DESIGN §3), so a query can never see another owner's rows. Searches are in
`memory_search` and `hybrid_search`.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    and_,
    bindparam,
    func,
    literal_column,
    select,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from service.core import assistants
from service.core.records import (
    Bank,
    Memory,
    OwnerKind,
    ReadScope,
    SourceKind,
    Status,
)
from service.storage import memory_rows, profiles
from service.storage.tables import MemoryRow, ProfileRow


async def insert(
    session: AsyncSession,
    *,
    owner_kind: OwnerKind,
    owner_id: str,
    bank: Bank,
    content: str,
    tags: Sequence[str],
    confidence: float,
    source_kind: SourceKind,
    source_chat_id: str | None,
    source_message_id: str | None,
    created_at: datetime,
    embedding: np.ndarray | None,
    embedding_model: str | None,
    updated_at: datetime | None = None,
) -> Memory:
    """Insert an active memory and return it.

    Args:
        embedding: (384,) float32, L2-normalized, or None to embed later.
        created_at: when the fact was stated (tz-aware).
        updated_at: its last change (tz-aware; a restored memory keeps it); None = created_at.
    """
    row = MemoryRow(
        id=uuid.uuid4(),
        owner_kind=owner_kind.value,
        owner_id=owner_id,
        bank=bank.value,
        content=content,
        tags=list(tags),
        confidence=confidence,
        status=Status.ACTIVE.value,
        source_kind=source_kind.value,
        source_chat_id=source_chat_id,
        source_message_id=source_message_id,
        created_at=created_at,
        updated_at=updated_at or created_at,
        last_used_at=None,
        version=1,
        embedding=embedding,
        embedding_model=embedding_model if embedding is not None else None,
    )
    session.add(row)
    await session.flush()
    return memory_rows.to_record(row)


@dataclass(frozen=True, slots=True)
class NewMemory:
    """One active memory to insert with `insert_many` (the arguments of `insert`)."""

    owner_kind: OwnerKind
    owner_id: str
    bank: Bank
    content: str
    tags: tuple[str, ...]
    confidence: float
    source_kind: SourceKind
    source_chat_id: str | None
    source_message_id: str | None
    created_at: datetime  #: when the fact was stated (tz-aware)
    embedding: np.ndarray | None  #: (384,) float32, L2-normalized, or None to embed later
    embedding_model: str | None
    updated_at: datetime | None = None  #: its last change; None = created_at


async def insert_many(session: AsyncSession, rows: Sequence[NewMemory]) -> list[Memory]:
    """Insert active memories in one batched statement (an import's batch) and return them
    in the order of `rows`; the same rows `insert` writes one by one.
    """
    added = [
        MemoryRow(
            id=uuid.uuid4(),
            owner_kind=r.owner_kind.value,
            owner_id=r.owner_id,
            bank=r.bank.value,
            content=r.content,
            tags=list(r.tags),
            confidence=r.confidence,
            status=Status.ACTIVE.value,
            source_kind=r.source_kind.value,
            source_chat_id=r.source_chat_id,
            source_message_id=r.source_message_id,
            created_at=r.created_at,
            updated_at=r.updated_at or r.created_at,
            last_used_at=None,
            version=1,
            embedding=r.embedding,
            embedding_model=r.embedding_model if r.embedding is not None else None,
        )
        for r in rows
    ]
    if not added:
        return []
    session.add_all(added)
    await session.flush()  # SQLAlchemy sends the batch as one INSERT … RETURNING
    return [memory_rows.to_record(row) for row in added]


async def get(
    session: AsyncSession,
    *,
    scope: ReadScope,
    memory_id: uuid.UUID,
    statuses: Sequence[Status] = (Status.ACTIVE,),
) -> Memory | None:
    """The memory with `memory_id` if it lies in `scope` and has one of `statuses`."""
    row = (
        await session.execute(memory_rows.owned(scope, statuses).where(MemoryRow.id == memory_id))
    ).scalar()
    return memory_rows.to_record(row) if row else None


async def get_many(
    session: AsyncSession,
    *,
    scope: ReadScope,
    memory_ids: Sequence[uuid.UUID],
    statuses: Sequence[Status] = (Status.ACTIVE,),
) -> list[Memory]:
    """The memories of `memory_ids` that lie in `scope` and have one of `statuses`, in
    ascending seq (one statement: the set-based `get` of bulk forgets).
    """
    ids = list(dict.fromkeys(memory_ids))
    if not ids or not scope:
        return []
    # the record's columns only (no vector to decode): a bulk forget reads thousands
    stmt = (
        select(*memory_rows.RECORD_COLUMNS)
        .where(
            memory_rows.scope_filter(scope),
            MemoryRow.status.in_([s.value for s in statuses]),
            MemoryRow.id.in_(ids),
        )
        .order_by(MemoryRow.seq)
    )
    return [memory_rows.record_from_row(r) for r in (await session.execute(stmt)).all()]


async def get_by_seq(
    session: AsyncSession,
    *,
    scope: ReadScope,
    seq: int,
    statuses: Sequence[Status] = (Status.ACTIVE,),
) -> Memory | None:
    """The memory with short id `seq` if it lies in `scope` and has one of `statuses`."""
    row = (
        await session.execute(memory_rows.owned(scope, statuses).where(MemoryRow.seq == seq))
    ).scalar()
    return memory_rows.to_record(row) if row else None


async def export_rows(session: AsyncSession, *, scope: ReadScope) -> list[Memory]:
    """Every memory in `scope` that still has content (active, superseded, archived)."""
    stmt = memory_rows.owned(scope, (Status.ACTIVE, Status.SUPERSEDED, Status.ARCHIVED)).order_by(
        MemoryRow.seq
    )
    return [memory_rows.to_record(r) for r in (await session.execute(stmt)).scalars()]


async def records_of(session: AsyncSession, *, scope: ReadScope) -> list[Memory]:
    """`export_rows` without reading vectors: every memory in `scope` that still has content,
    in ascending seq, as records (what a bulk forget needs; thousands of rows decode fast).
    """
    if not scope:
        return []
    stmt = (
        select(*memory_rows.RECORD_COLUMNS)
        .where(
            memory_rows.scope_filter(scope),
            MemoryRow.status.in_(
                [Status.ACTIVE.value, Status.SUPERSEDED.value, Status.ARCHIVED.value]
            ),
        )
        .order_by(MemoryRow.seq)
    )
    return [memory_rows.record_from_row(r) for r in (await session.execute(stmt)).all()]


async def list_memories(
    session: AsyncSession,
    *,
    scope: ReadScope,
    limit: int,
    offset: int,
    statuses: Sequence[Status] = (Status.ACTIVE,),
) -> tuple[list[Memory], int]:
    """A page of memories in `scope`, newest first, and the total count."""
    base = memory_rows.owned(scope, statuses)
    total = (await session.execute(select(func.count()).select_from(base.subquery()))).scalar_one()
    rows = (
        await session.execute(
            base.order_by(MemoryRow.created_at.desc(), MemoryRow.seq.desc())
            .limit(limit)
            .offset(offset)
        )
    ).scalars()
    return [memory_rows.to_record(r) for r in rows], int(total)


async def core_memories(session: AsyncSession, *, scope: ReadScope, limit: int) -> list[Memory]:
    """The `limit` most confident, then most recent, active memories in `scope`.

    Each cell's best come from its own ordered index scan (ix_memories_owner_bank_core), so
    the cost does not grow with the owner's memory count.
    """
    if not scope or limit <= 0:
        return []
    params: dict[str, Any] = {"limit": limit}
    for i, cell in enumerate(scope.scopes):
        params |= {
            f"core{i}_kind": cell.owner_kind.value,
            f"core{i}_owner": cell.owner_id,
            f"core{i}_bank": cell.bank.value,
        }
    rows = (await session.execute(_core_statement(len(scope.scopes)), params)).all()
    return [memory_rows.record_from_row(r) for r in rows]


async def profile_and_core_memories(
    session: AsyncSession, *, user_id: str, view: str, scope: ReadScope, limit: int
) -> tuple[profiles.Profile | None, list[Memory]]:
    """The user's stored profile for `view` (None without one) and `core_memories(scope,
    limit)`, in one statement: the inlet needs the core memories whenever the profile is
    missing or unusable, and one round trip instead of two is what it saves on every turn.

    Raises:
        ValueError: an empty `scope` or a `limit` < 1 (`core_memories` answers those alone).
    """
    if not scope or limit <= 0:
        raise ValueError("profile_and_core_memories needs a scope and a positive limit")
    params: dict[str, Any] = {"limit": limit, "profile_user": user_id, "profile_view": view}
    for i, cell in enumerate(scope.scopes):
        params |= {
            f"core{i}_kind": cell.owner_kind.value,
            f"core{i}_owner": cell.owner_id,
            f"core{i}_bank": cell.bank.value,
        }
    rows = (await session.execute(_profile_and_core_statement(len(scope.scopes)), params)).all()
    width = len(memory_rows.RECORD_COLUMNS)
    # every row repeats the profile's columns (NULLs without one); a row without a memory
    # (its seq NULL) is the one row the outer join gives when the scope has no core memories
    profile = profiles.from_values(*rows[0][width:]) if rows and rows[0][-1] is not None else None
    return profile, [memory_rows.record_from_row(r) for r in rows if r.seq is not None]


@functools.lru_cache(maxsize=16)
def _profile_and_core_statement(cells: int) -> Select[Any]:
    """`_core_statement`'s memories outer-joined to the profile row: at least one row,
    profile or not. The cells' best are picked by their keys and joined to their rows once:
    the statement stays under psycopg's 4 kB query cache (parsed once, not on every turn).
    """
    limit = bindparam("limit", type_=Integer)
    order = (
        memory_rows.TABLE.c.confidence.desc(),
        memory_rows.TABLE.c.created_at.desc(),
        memory_rows.TABLE.c.seq.desc(),
    )
    keys = (memory_rows.TABLE.c.seq, memory_rows.TABLE.c.confidence, memory_rows.TABLE.c.created_at)
    best = memory_rows.union_parts(
        [
            select(*keys).where(memory_rows.cell_param(f"core{i}")).order_by(*order).limit(limit)
            for i in range(cells)
        ]
    ).subquery("best")
    picked = (
        select(best.c.seq)
        .order_by(best.c.confidence.desc(), best.c.created_at.desc(), best.c.seq.desc())
        .limit(limit)
        .subquery("picked")
    )
    core = (
        select(*memory_rows.RECORD_COLUMNS)
        .join_from(picked, memory_rows.TABLE, memory_rows.TABLE.c.seq == picked.c.seq)
        .subquery("core")
    )
    table = ProfileRow.__table__
    profile = (
        select(table)
        .where(
            table.c.user_id == bindparam("profile_user"), table.c.view == bindparam("profile_view")
        )
        .subquery("profile")
    )
    anchor = select(literal_column("1").label("one")).subquery("anchor")
    return (
        select(
            *(core.c[c.name] for c in memory_rows.RECORD_COLUMNS),
            *(profile.c[c.name].label(f"profile_{c.name}") for c in table.c),
        )
        .select_from(anchor.outerjoin(profile, true()).outerjoin(core, true()))
        .order_by(core.c.confidence.desc(), core.c.created_at.desc(), core.c.seq.desc())
    )


@functools.lru_cache(maxsize=16)
def _core_statement(cells: int) -> Select[Any]:
    limit = bindparam("limit", type_=Integer)
    order = (
        memory_rows.TABLE.c.confidence.desc(),
        memory_rows.TABLE.c.created_at.desc(),
        memory_rows.TABLE.c.seq.desc(),
    )
    best = memory_rows.union_parts(
        [
            select(*memory_rows.RECORD_COLUMNS)
            .where(memory_rows.cell_param(f"core{i}"))
            .order_by(*order)
            .limit(limit)
            for i in range(cells)
        ]
    ).subquery()
    return (
        select(best)
        .order_by(best.c.confidence.desc(), best.c.created_at.desc(), best.c.seq.desc())
        .limit(limit)
    )


async def count_active(session: AsyncSession, *, scope: ReadScope) -> int:
    """Number of active memories in `scope`."""
    stmt = select(func.count()).where(
        memory_rows.scope_filter(scope), MemoryRow.status == Status.ACTIVE.value
    )
    return int((await session.execute(stmt)).scalar_one())


async def supersede(
    session: AsyncSession,
    *,
    memory_id: uuid.UUID,
    successor_id: uuid.UUID,
    at: datetime,
    expected_version: int | None = None,
) -> bool:
    """Mark an active memory as replaced by `successor_id` (kept as history, never injected).

    Only an active row changes, and with `expected_version` only that version of it: a
    memory forgotten, archived, superseded or edited meanwhile stays as it is (DESIGN §5.6).

    Returns:
        True when the row changed.
    """
    result = await session.execute(
        update(MemoryRow)
        .where(_unchanged(memory_id, expected_version))
        .values(
            status=Status.SUPERSEDED.value,
            superseded_by=successor_id,
            updated_at=at,
            version=MemoryRow.version + 1,
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def set_confidence(
    session: AsyncSession, *, memory_id: uuid.UUID, confidence: float, at: datetime
) -> bool:
    """Change an active memory's confidence (a repeated statement confirms it).

    Returns:
        True when the row changed (False: it is no longer active, e.g. forgotten).
    """
    result = await session.execute(
        update(MemoryRow)
        .where(_unchanged(memory_id, None))
        .values(confidence=confidence, updated_at=at, version=MemoryRow.version + 1)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def set_status(
    session: AsyncSession,
    *,
    memory_id: uuid.UUID,
    status: Status,
    at: datetime,
    expected_version: int | None = None,
) -> bool:
    """Change a memory's status (archive, restore); a forgotten one never changes again.

    Args:
        expected_version: change the row only while it is active at this version (an
            operation decided on what was shown, DESIGN §5.6); None = any live status.

    Returns:
        True when the row changed.
    """
    where = (
        _unchanged(memory_id, expected_version)
        if expected_version is not None
        else and_(MemoryRow.id == memory_id, MemoryRow.status != Status.DELETED.value)
    )
    result = await session.execute(
        update(MemoryRow)
        .where(where)
        .values(status=status.value, updated_at=at, version=MemoryRow.version + 1)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def _unchanged(memory_id: uuid.UUID, version: int | None) -> ColumnElement[bool]:
    """The row `memory_id` while active (and at `version`, when given)."""
    where = and_(MemoryRow.id == memory_id, MemoryRow.status == Status.ACTIVE.value)
    return and_(where, MemoryRow.version == version) if version is not None else where


@dataclass(frozen=True, slots=True)
class RowState:
    """Where a memory row stands: what an operation decided earlier is checked against."""

    status: Status  #: current status
    version: int  #: current version (every change bumps it)


async def lock_rows(
    session: AsyncSession, *, memory_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, RowState]:
    """Row-lock memories until the transaction ends, in ascending `seq`, and read their state.

    Every writer that changes memories decided earlier (extraction after its LLM call,
    forget) locks them through here, so they always take row locks in the same order and
    never deadlock one another; the locks are only ever held by short write transactions.

    Returns:
        memory id → state, for the ids that exist.
    """
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        return {}
    stmt = (
        select(MemoryRow.id, MemoryRow.status, MemoryRow.version)
        .where(MemoryRow.id.in_(ids))
        .order_by(MemoryRow.seq)
        .with_for_update()
    )
    return {
        row.id: RowState(
            memory_rows.STATUSES.get(row.status) or Status(row.status), int(row.version)
        )
        for row in (await session.execute(stmt)).all()
    }


async def update_fields(
    session: AsyncSession,
    *,
    memory_id: uuid.UUID,
    at: datetime,
    content: str | None = None,
    bank: Bank | None = None,
    tags: Sequence[str] | None = None,
    embedding: np.ndarray | None = None,
    embedding_model: str | None = None,
) -> None:
    """Change content, bank or tags in place (manual edits); bumps the version."""
    values: dict[str, object] = {"updated_at": at, "version": MemoryRow.version + 1}
    if content is not None:
        values["content"] = content
        values["embedding"] = embedding
        values["embedding_model"] = embedding_model if embedding is not None else None
    if bank is not None:
        values["bank"] = bank.value
    if tags is not None:
        values["tags"] = list(tags)
    await session.execute(update(MemoryRow).where(MemoryRow.id == memory_id).values(**values))


async def newest_version(session: AsyncSession, *, memory_id: uuid.UUID) -> uuid.UUID:
    """The id of the version that replaced `memory_id` last: its `superseded_by`, followed
    while the row is superseded (an archived row's `superseded_by` is a summary, not a
    version); `memory_id` itself when nothing replaced it.
    """
    current, seen = memory_id, {memory_id}
    while True:
        successor = await session.scalar(
            select(MemoryRow.superseded_by).where(
                MemoryRow.id == current, MemoryRow.status == Status.SUPERSEDED.value
            )
        )
        if successor is None or successor in seen:
            return current
        seen.add(successor)
        current = successor


async def history_chain(session: AsyncSession, *, memory_id: uuid.UUID) -> list[uuid.UUID]:
    """Ids of `memory_id` and every earlier version that it (transitively) superseded."""
    chain = [memory_id]
    frontier = [memory_id]
    while frontier:
        rows = (
            (
                await session.execute(
                    select(MemoryRow.id).where(MemoryRow.superseded_by.in_(frontier))
                )
            )
            .scalars()
            .all()
        )
        frontier = [r for r in rows if r not in chain]
        chain.extend(frontier)
    return chain


async def history_chains(
    session: AsyncSession, *, memory_ids: Sequence[uuid.UUID]
) -> list[uuid.UUID]:
    """`history_chain` of many memories at once: `memory_ids` and every earlier version any
    of them (transitively) superseded, in one recursive statement; the given ids first.
    """
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        return []
    roots = select(MemoryRow.id).where(MemoryRow.id.in_(ids)).cte("chain", recursive=True)
    earlier = select(MemoryRow.id).join(roots, MemoryRow.superseded_by == roots.c.id)
    chain = roots.union(earlier)
    found = set((await session.execute(select(chain.c.id))).scalars())
    return ids + sorted(found - set(ids))


async def tombstone(
    session: AsyncSession, *, memory_ids: Sequence[uuid.UUID], at: datetime
) -> None:
    """Forget memories: remove content, tags, vectors and full text; keep a content-free row.

    TOMBSTONE_ROWS rows per statement: the full-text statistics' statement trigger
    (migration 0014) joins the statement's old and new rows, and hundreds at once made a
    bulk forget's statement take minutes in bench/noisy_neighbour.py.
    """
    ids = list(memory_ids)
    for start in range(0, len(ids), TOMBSTONE_ROWS):
        await _tombstone(session, memory_ids=ids[start : start + TOMBSTONE_ROWS], at=at)


TOMBSTONE_ROWS = 50
"""Rows one tombstone statement changes (see `tombstone`)."""


async def _tombstone(
    session: AsyncSession, *, memory_ids: Sequence[uuid.UUID], at: datetime
) -> None:
    await session.execute(
        update(MemoryRow)
        .where(MemoryRow.id.in_(list(memory_ids)))
        .values(
            status=Status.DELETED.value,
            content="",
            tags=[],
            embedding=None,
            embedding_model=None,
            updated_at=at,
            version=MemoryRow.version + 1,
        )
    )


async def assistant_owners(session: AsyncSession, *, user_id: str | None = None) -> list[str]:
    """Owner ids of Assistant Memory holding any row (any status), sorted; with `user_id`
    only that user's (core/assistants.py: every one starts with `owner_prefix(user_id)`).

    This finds cells, not memories: what a cell holds is read with its scope as usual.
    """
    stmt = (
        select(MemoryRow.owner_id)
        .where(MemoryRow.owner_kind == OwnerKind.ASSISTANT.value)
        .distinct()
        .order_by(MemoryRow.owner_id)
    )
    if user_id is not None:
        # starts_with, not LIKE: a user id may hold % or _
        stmt = stmt.where(func.starts_with(MemoryRow.owner_id, assistants.owner_prefix(user_id)))
    return list((await session.execute(stmt)).scalars())


async def from_message(
    session: AsyncSession,
    *,
    scope: ReadScope,
    chat_id: str,
    message_id: str,
    tag: str,
    forgotten_since: datetime | None = None,
) -> tuple[list[Memory], int]:
    """Memories in `scope` that carry `tag` and came from one message of one chat.

    Returns:
        (the active ones, oldest first; how many of them were forgotten at or after
        `forgotten_since` — 0 when None).
    """
    where = [
        memory_rows.scope_filter(scope),
        MemoryRow.source_chat_id == chat_id,
        MemoryRow.source_message_id == message_id,
    ]
    active = select(MemoryRow).where(
        *where, MemoryRow.status == Status.ACTIVE.value, MemoryRow.tags.contains([tag])
    )
    rows = [
        memory_rows.to_record(r)
        for r in (await session.execute(active.order_by(MemoryRow.seq))).scalars()
    ]
    if forgotten_since is None:
        return rows, 0
    # a tombstone keeps no tags: every memory of the message forgotten since then counts
    gone = (
        select(func.count())
        .select_from(MemoryRow)
        .where(
            *where,
            MemoryRow.status == Status.DELETED.value,
            MemoryRow.updated_at >= forgotten_since,
        )
    )
    return rows, int((await session.execute(gone)).scalar_one())
