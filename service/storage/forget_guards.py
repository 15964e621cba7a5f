"""Forget guards (migration 0015): a forgotten memory's vector and fingerprint, kept for the
turns accepted before its forget until they are done or discarded (service/core/forget_guard.py).

Lock order is every writer's (docs/discussions/durable-turns.md): turn rows by ascending id
before memory rows, so a forget and an extraction writing the same turns never deadlock, and
whichever commits second sees the other: an extraction that locked its turns first has
written before the forget looks at them (the memory it wrote is then forgotten with its
history or stays a separate fact), and one that locks them after the forget reads its guards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, literal, or_, select
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.core import assistants
from service.core.forget_guard import Fingerprint
from service.core.records import OwnerKind, TurnStatus
from service.storage.tables import ForgetGuardRow, MemoryRow, TurnRow

__all__ = ["Guard", "add", "for_turns", "lock_open_turns"]


@dataclass(frozen=True, slots=True)
class Guard:
    """One forgotten memory, as a turn's extraction checks its facts against it."""

    vector: np.ndarray | None  #: (dimension,) float32, L2-normalized; None without a vector
    fingerprint: Fingerprint  #: keyed digests of its text


def _could_write(owner_kind: OwnerKind, owner_id: str) -> ColumnElement[bool]:
    """Turns whose chat may write a bank of this owner (a superset is harmless: a guard only
    drops a fact that restates the forgotten memory).
    """
    if owner_kind is OwnerKind.CHAT:
        return TurnRow.chat_id == owner_id
    if owner_kind is OwnerKind.FOLDER:
        folder: ColumnElement[str] = TurnRow.payload["chat"]["folder_id"].astext
        return folder == owner_id
    if owner_kind is OwnerKind.ASSISTANT:
        parsed = assistants.parse_owner(owner_id)
        return TurnRow.user_id == (parsed[0] if parsed else owner_id)
    return TurnRow.user_id == owner_id


async def lock_open_turns(
    session: AsyncSession, *, owners: Iterable[tuple[OwnerKind, str]]
) -> list[int]:
    """Row-lock (ascending id, until the unit of work ends) the turns not extracted yet —
    queued, or failed, which an admin may queue again — that could write a bank of one of
    `owners`; their ids.
    """
    conditions = [_could_write(kind, owner) for kind, owner in dict.fromkeys(owners)]
    if not conditions:
        return []
    stmt = (
        select(TurnRow.id)
        .where(
            TurnRow.status.in_([TurnStatus.QUEUED.value, TurnStatus.FAILED.value]),
            or_(*conditions),
        )
        .order_by(TurnRow.id)
        .with_for_update()
    )
    return [int(i) for i in (await session.execute(stmt)).scalars()]


async def add(
    session: AsyncSession,
    *,
    turn_ids: Sequence[int],
    memories: Sequence[tuple[uuid.UUID, Fingerprint]],
) -> int:
    """Give each turn a guard per memory: the memory's stored vector (read here, so call this
    before the tombstone clears it) and its fingerprint. Returns the rows written.
    """
    if not turn_ids or not memories:
        return 0
    written = 0
    for memory_id, fingerprint in memories:
        vector = select(MemoryRow.embedding).where(MemoryRow.id == memory_id).scalar_subquery()
        rows = select(TurnRow.id, vector, literal(fingerprint.to_json(), type_=JSONB)).where(
            TurnRow.id.in_(list(turn_ids))
        )
        result = await session.execute(
            insert(ForgetGuardRow.__table__).from_select(
                ["turn_id", "embedding", "fingerprint"], rows
            )
        )
        written += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return written


async def for_turns(session: AsyncSession, *, turn_ids: Sequence[int]) -> dict[int, list[Guard]]:
    """The guards of these turns, by turn id (turns without any are left out)."""
    if not turn_ids:
        return {}
    stmt = (
        select(ForgetGuardRow.turn_id, ForgetGuardRow.embedding, ForgetGuardRow.fingerprint)
        .where(ForgetGuardRow.turn_id.in_(list(turn_ids)))
        .order_by(ForgetGuardRow.id)
    )
    found: dict[int, list[Guard]] = {}
    for turn_id, vector, data in (await session.execute(stmt)).all():
        found.setdefault(int(turn_id), []).append(
            Guard(
                None if vector is None else np.asarray(vector, dtype=np.float32),
                Fingerprint.from_json(_as_dict(data)),
            )
        )
    return found


def _as_dict(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError(f"a forget guard's fingerprint is not an object: {type(data).__name__}")
    return data
