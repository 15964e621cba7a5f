"""Memory vectors that belong to another embedding model, or are missing, and their refill.

A memory "needs a vector" when it still has content (not a tombstone) and its vector is
missing or was made by another model than the loaded one. Full-text search never needs a
vector, so such memories stay findable by keyword while they wait.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import ColumnElement, and_, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from service.core.records import Status
from service.storage.tables import MemoryRow

__all__ = [
    "PendingMemory",
    "clear_foreign",
    "count_pending",
    "models_in_use",
    "pending_batch",
    "store_vectors",
]


@dataclass(frozen=True, slots=True)
class PendingMemory:
    """A memory waiting for a vector."""

    id: uuid.UUID  #: memory id
    version: int  #: its version when read; the vector is stored only if it is unchanged
    content: str  #: the text to embed


def _needs_vector(model: str) -> ColumnElement[bool]:
    return and_(
        MemoryRow.status != Status.DELETED.value,
        MemoryRow.content != "",
        or_(MemoryRow.embedding.is_(None), MemoryRow.embedding_model.is_distinct_from(model)),
    )


async def clear_foreign(session: AsyncSession, *, model: str) -> int:
    """Drop the vectors made by any other model than `model`; returns how many.

    Two models' vectors live in different spaces: comparing a query of one with memories of
    the other gives meaningless similarities. Without a vector a memory is left out of the
    vector search (and still found by keyword) until it is re-embedded.
    """
    result = await session.execute(
        update(MemoryRow)
        .where(MemoryRow.embedding.is_not(None), MemoryRow.embedding_model.is_distinct_from(model))
        .values(embedding=None, embedding_model=None)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def count_pending(session: AsyncSession, *, model: str) -> int:
    """Memories with content whose vector is missing or not made by `model`."""
    stmt = select(func.count()).select_from(MemoryRow).where(_needs_vector(model))
    return int((await session.execute(stmt)).scalar_one())


async def pending_batch(session: AsyncSession, *, model: str, limit: int) -> list[PendingMemory]:
    """Up to `limit` memories needing a vector: active ones first, then by insertion order."""
    stmt = (
        select(MemoryRow.id, MemoryRow.version, MemoryRow.content)
        .where(_needs_vector(model))
        .order_by((MemoryRow.status != Status.ACTIVE.value), MemoryRow.seq)
        .limit(limit)
    )
    return [PendingMemory(i, int(v), str(c)) for i, v, c in (await session.execute(stmt)).all()]


async def store_vectors(
    session: AsyncSession, *, items: Sequence[PendingMemory], vectors: np.ndarray, model: str
) -> int:
    """Store one vector per item where the memory was not changed meanwhile.

    Args:
        items: the memories as read by `pending_batch`.
        vectors: (len(items), d) float32 (d: the model's dimension), L2-normalized, in the
            order of `items`.
        model: name of the model that made them.

    Returns:
        Vectors stored (an item edited or forgotten since it was read is skipped: its own
        change brought a fresh vector or removed the content).
    """
    stored = 0
    for item, vector in zip(items, vectors, strict=True):
        result = await session.execute(
            update(MemoryRow)
            .where(
                MemoryRow.id == item.id,
                MemoryRow.version == item.version,
                MemoryRow.status != Status.DELETED.value,
            )
            .values(embedding=np.asarray(vector, dtype=np.float32), embedding_model=model)
        )
        stored += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return stored


async def models_in_use(session: AsyncSession) -> dict[str | None, int]:
    """Embedding model name → memories with content (None: no vector yet)."""
    stmt = (
        select(MemoryRow.embedding_model, func.count())
        .where(MemoryRow.status != Status.DELETED.value, MemoryRow.content != "")
        .group_by(MemoryRow.embedding_model)
    )
    return {m: int(n) for m, n in (await session.execute(stmt)).all()}
