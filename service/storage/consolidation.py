"""Queries of the summarizer (DESIGN §8): owners with old memories, their memories with
vectors, merging sources into a summary, pruning, restoring, and the record of each run.

Like every read in `storage/`, the reads take the owner's `scope` and put it inside the SQL.
Sources of a summary are archived with `superseded_by` = the summary's id, and the summary
lists them in `summary_of`, so a merge can always be undone (`restore_sources`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import any_, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from service.core.consolidation import Entry, SummaryDraft
from service.core.records import Memory, OwnerKind, ReadScope, SourceKind, Status
from service.storage import memories, memory_rows, turns
from service.storage.tables import ConsolidationRunRow, MemoryEventRow, MemoryRow

__all__ = [
    "RESTORE_ACTION",
    "RunRecord",
    "archive",
    "archive_into_summary",
    "current_versions",
    "entries",
    "insert_summary",
    "last_runs",
    "lock_owner",
    "owner_of",
    "owners_due",
    "record_run",
    "restore_sources",
    "summaries_containing",
    "summary_sources",
]

RESTORE_ACTION = "restore"
"""Audit action of a memory an operator brought back; such a memory is pinned: the
summarizer never merges or prunes it again."""


async def owners_due(
    session: AsyncSession, *, stated_before: datetime
) -> list[tuple[OwnerKind, str]]:
    """Owners (users and folders) with an active, non-summary memory stated before
    `stated_before`, ordered by kind and id.

    This is the one read that spans owners: it returns owner ids only, never memories; each
    owner's memories are then read within that owner's scope.
    """
    stmt = (
        select(MemoryRow.owner_kind, MemoryRow.owner_id)
        .where(
            MemoryRow.status == Status.ACTIVE.value,
            MemoryRow.source_kind.notin_([k.value for k in SourceKind if k.is_summary]),
            MemoryRow.created_at <= stated_before,
        )
        .group_by(MemoryRow.owner_kind, MemoryRow.owner_id)
        .order_by(MemoryRow.owner_kind, MemoryRow.owner_id)
    )
    return [(OwnerKind(kind), str(owner)) for kind, owner in (await session.execute(stmt)).all()]


async def entries(session: AsyncSession, *, scope: ReadScope) -> list[Entry]:
    """Every active memory in `scope` with its vector and whether it is pinned.

    Returns:
        Entries oldest stated first; `vector` is (d,) float32 (the model's dimension) or None
        when not embedded;
        `pinned` is True for memories an operator restored (audit action "restore").
    """
    if not scope:
        return []
    pinned = exists().where(
        MemoryEventRow.memory_id == MemoryRow.id, MemoryEventRow.action == RESTORE_ACTION
    )
    stmt = (
        select(MemoryRow, pinned.label("pinned"))
        .where(memory_rows.scope_filter(scope), MemoryRow.status == Status.ACTIVE.value)
        .order_by(MemoryRow.created_at, MemoryRow.seq)
    )
    return [
        Entry(
            memory=memory_rows.to_record(row),
            vector=None if row.embedding is None else np.asarray(row.embedding, dtype=np.float32),
            pinned=bool(is_pinned),
        )
        for row, is_pinned in (await session.execute(stmt)).all()
    ]


async def lock_owner(session: AsyncSession, *, owner_kind: OwnerKind, owner_id: str) -> None:
    """Serialize changes to one owner's memories until the transaction ends.

    A user's lock is the one extraction takes for the sender (`turns.lock_sender`), so a
    merge never interleaves with an extraction of the same user; a folder has its own key.
    """
    if owner_kind is OwnerKind.USER:
        await turns.lock_sender(session, user_id=owner_id)
        return
    await session.execute(
        select(func.pg_advisory_xact_lock(func.hashtextextended("memory-folder:" + owner_id, 0)))
    )


async def current_versions(
    session: AsyncSession, *, scope: ReadScope, memory_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, datetime]:
    """`updated_at` of the memories among `memory_ids` that are still active in `scope`,
    row-locked until the transaction ends (a plan is applied only to unchanged rows).
    """
    if not scope or not memory_ids:
        return {}
    stmt = (
        select(MemoryRow.id, MemoryRow.updated_at)
        .where(
            memory_rows.scope_filter(scope),
            MemoryRow.status == Status.ACTIVE.value,
            MemoryRow.id.in_(list(memory_ids)),
        )
        .order_by(MemoryRow.seq)
        .with_for_update()
    )
    return dict((await session.execute(stmt)).all())


async def insert_summary(
    session: AsyncSession,
    *,
    owner_kind: OwnerKind,
    owner_id: str,
    draft: SummaryDraft,
    embedding: np.ndarray,
    embedding_model: str,
    at: datetime,
) -> Memory:
    """Store an active summary memory that lists its sources in `summary_of`.

    Its `created_at` is when the newest source was stated (the fact's date for ranking and
    display); `updated_at` is `at`.

    Args:
        embedding: (d,) float32, L2-normalized vector of `draft.content`.
        at: the run's time (tz-aware).
    """
    summary = await memories.insert(
        session,
        owner_kind=owner_kind,
        owner_id=owner_id,
        bank=draft.bank,
        content=draft.content,
        tags=draft.tags,
        confidence=draft.confidence,
        source_kind=SourceKind.SUMMARY,
        source_chat_id=None,
        source_message_id=None,
        created_at=draft.last_stated_at,
        embedding=embedding,
        embedding_model=embedding_model,
    )
    await session.execute(
        update(MemoryRow)
        .where(MemoryRow.id == summary.id)
        .values(summary_of=list(draft.source_ids), updated_at=at)
    )
    return dataclasses.replace(summary, updated_at=at)


async def archive_into_summary(
    session: AsyncSession,
    *,
    source_ids: Sequence[uuid.UUID],
    summary_id: uuid.UUID,
    at: datetime,
) -> int:
    """Archive active sources with `superseded_by` = `summary_id`; returns rows changed."""
    result = await session.execute(
        update(MemoryRow)
        .where(MemoryRow.id.in_(list(source_ids)), MemoryRow.status == Status.ACTIVE.value)
        .values(
            status=Status.ARCHIVED.value,
            superseded_by=summary_id,
            updated_at=at,
            version=MemoryRow.version + 1,
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def archive(session: AsyncSession, *, memory_ids: Sequence[uuid.UUID], at: datetime) -> int:
    """Archive active memories (pruning beyond the cap); returns rows changed."""
    if not memory_ids:
        return 0
    result = await session.execute(
        update(MemoryRow)
        .where(MemoryRow.id.in_(list(memory_ids)), MemoryRow.status == Status.ACTIVE.value)
        .values(status=Status.ARCHIVED.value, updated_at=at, version=MemoryRow.version + 1)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def summary_sources(
    session: AsyncSession, *, scope: ReadScope, summary_id: uuid.UUID
) -> list[Memory]:
    """The memories a summary in `scope` was merged from, oldest stated first.

    Forgotten sources (tombstones) are left out; restored ones are included (active).
    Returns [] when `summary_id` is not a summary in `scope`.
    """
    if not scope:
        return []
    listed = (
        await session.execute(
            select(MemoryRow.summary_of).where(
                memory_rows.scope_filter(scope), MemoryRow.id == summary_id
            )
        )
    ).scalar()
    if not listed:
        return []
    stmt = (
        select(MemoryRow)
        .where(
            memory_rows.scope_filter(scope),
            MemoryRow.id.in_(list(listed)),
            MemoryRow.status != Status.DELETED.value,
        )
        .order_by(MemoryRow.created_at, MemoryRow.seq)
    )
    return [memory_rows.to_record(r) for r in (await session.execute(stmt)).scalars()]


async def summaries_containing(
    session: AsyncSession, *, scope: ReadScope, memory_id: uuid.UUID
) -> list[Memory]:
    """Summaries in `scope` (any status but deleted) that list `memory_id` as a source.

    Forgetting a source must also reach the summary that repeats its content (case 31).
    """
    if not scope:
        return []
    stmt = (
        select(MemoryRow)
        .where(
            memory_rows.scope_filter(scope),
            any_(MemoryRow.summary_of) == memory_id,
            MemoryRow.status != Status.DELETED.value,
        )
        .order_by(MemoryRow.seq)
    )
    return [memory_rows.to_record(r) for r in (await session.execute(stmt)).scalars()]


async def summaries_containing_any(
    session: AsyncSession, *, scope: ReadScope, memory_ids: Sequence[uuid.UUID]
) -> list[Memory]:
    """`summaries_containing` for many sources at once: the summaries in `scope` (any status
    but deleted) that list any of `memory_ids` as a source, in ascending seq.
    """
    ids = list(dict.fromkeys(memory_ids))
    if not scope or not ids:
        return []
    stmt = (
        select(MemoryRow)
        .where(
            memory_rows.scope_filter(scope),
            MemoryRow.summary_of.overlap(ids),
            MemoryRow.status != Status.DELETED.value,
        )
        .order_by(MemoryRow.seq)
    )
    return [memory_rows.to_record(r) for r in (await session.execute(stmt)).scalars()]


async def restore_sources_of_many(
    session: AsyncSession, *, scope: ReadScope, summary_ids: Sequence[uuid.UUID], at: datetime
) -> int:
    """`restore_sources` of many summaries in one statement; returns how many came back."""
    if not scope or not summary_ids:
        return 0
    result = await session.execute(
        update(MemoryRow)
        .where(
            memory_rows.scope_filter(scope),
            MemoryRow.superseded_by.in_(list(summary_ids)),
            MemoryRow.status == Status.ARCHIVED.value,
        )
        .values(
            status=Status.ACTIVE.value,
            superseded_by=None,
            updated_at=at,
            version=MemoryRow.version + 1,
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def owner_of(session: AsyncSession, *, memory_id: uuid.UUID) -> tuple[OwnerKind, str] | None:
    """The owner of a memory, for operator commands that start from a bare id (`restore`).

    Returns only the owner, never content; the memory itself is then read within that
    owner's scope. None when there is no such memory.
    """
    row = (
        await session.execute(
            select(MemoryRow.owner_kind, MemoryRow.owner_id).where(MemoryRow.id == memory_id)
        )
    ).first()
    return (OwnerKind(row[0]), str(row[1])) if row else None


async def restore_sources(
    session: AsyncSession, *, scope: ReadScope, summary_id: uuid.UUID, at: datetime
) -> list[Memory]:
    """Make the archived sources of a summary active again and unlink them.

    Only sources still archived under this summary come back; a source forgotten since
    stays a tombstone.

    Returns:
        The restored memories (active), oldest stated first.
    """
    if not scope:
        return []
    stmt = (
        update(MemoryRow)
        .where(
            memory_rows.scope_filter(scope),
            MemoryRow.superseded_by == summary_id,
            MemoryRow.status == Status.ARCHIVED.value,
        )
        .values(
            status=Status.ACTIVE.value,
            superseded_by=None,
            updated_at=at,
            version=MemoryRow.version + 1,
        )
        .returning(MemoryRow.id)
    )
    ids = list((await session.execute(stmt)).scalars())
    if not ids:
        return []
    rows = (
        await session.execute(
            select(MemoryRow)
            .where(MemoryRow.id.in_(ids))
            .order_by(MemoryRow.created_at, MemoryRow.seq)
        )
    ).scalars()
    return [memory_rows.to_record(r) for r in rows]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One recorded run over one owner."""

    owner_kind: OwnerKind  #: user or folder
    owner_id: str  #: user id or folder id
    trigger: str  #: daily or limit
    outcome: str  #: applied, refused or failed
    active_before: int  #: active memories before the run
    active_after: int  #: active memories after it
    summaries: int  #: summaries written
    merged: int  #: sources archived into them
    pruned: int  #: memories archived beyond the cap
    detail: str | None  #: the guard's or the failure's sentence
    started_at: datetime  #: when planning began (UTC)
    finished_at: datetime  #: when the run committed (UTC)


async def record_run(session: AsyncSession, *, run: RunRecord) -> None:
    """Append the record of one run (committed with the changes it describes)."""
    session.add(
        ConsolidationRunRow(
            owner_kind=run.owner_kind.value,
            owner_id=run.owner_id,
            trigger=run.trigger,
            outcome=run.outcome,
            active_before=run.active_before,
            active_after=run.active_after,
            summaries=run.summaries,
            merged=run.merged,
            pruned=run.pruned,
            detail=run.detail,
            started_at=run.started_at,
            finished_at=run.finished_at,
        )
    )
    await session.flush()


async def last_runs(
    session: AsyncSession, *, owner_kind: OwnerKind, owner_id: str, limit: int = 10
) -> list[RunRecord]:
    """The owner's most recent recorded runs, newest first."""
    stmt = (
        select(ConsolidationRunRow)
        .where(
            ConsolidationRunRow.owner_kind == owner_kind.value,
            ConsolidationRunRow.owner_id == owner_id,
        )
        .order_by(ConsolidationRunRow.finished_at.desc(), ConsolidationRunRow.id.desc())
        .limit(limit)
    )
    return [
        RunRecord(
            owner_kind=OwnerKind(r.owner_kind),
            owner_id=r.owner_id,
            trigger=r.trigger,
            outcome=r.outcome,
            active_before=r.active_before,
            active_after=r.active_after,
            summaries=r.summaries,
            merged=r.merged,
            pruned=r.pruned,
            detail=r.detail,
            started_at=r.started_at,
            finished_at=r.finished_at,
        )
        for r in (await session.execute(stmt)).scalars()
    ]
