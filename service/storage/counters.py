"""Counters shared by the processes of one installation (table service_counters)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage.tables import ServiceCounterRow

__all__ = ["CounterDelta", "CounterTotal", "add", "totals"]


@dataclass(frozen=True, slots=True)
class CounterDelta:
    """What one process counted since its last flush, for one (name, label)."""

    name: str
    label: str
    delta: int
    last_at: datetime | None = None  #: when its latest event happened
    detail: str | None = None  #: a sentence about that event, kept when it is the latest


@dataclass(frozen=True, slots=True)
class CounterTotal:
    """The installation's sum for one (name, label)."""

    name: str
    label: str
    value: int
    last_at: datetime | None
    detail: str | None


async def add(session: AsyncSession, deltas: Iterable[CounterDelta]) -> None:
    """Add `deltas` to the shared totals: the value grows by the delta, `last_at` becomes the
    later of the two, and `detail` follows the latest event that has one. One upsert each,
    in (name, label) order, so two processes flushing at once take the row locks in one order.
    """
    table = ServiceCounterRow.__table__
    for d in sorted(deltas, key=lambda d: (d.name, d.label)):
        statement = insert(ServiceCounterRow).values(
            name=d.name, label=d.label, value=d.delta, last_at=d.last_at, detail=d.detail
        )
        new = statement.excluded
        newer = and_(
            new.last_at.is_not(None), or_(table.c.last_at.is_(None), new.last_at >= table.c.last_at)
        )
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=["name", "label"],
                set_={
                    "value": table.c.value + new.value,
                    "last_at": func.greatest(table.c.last_at, new.last_at),
                    "detail": case(
                        (and_(newer, new.detail.is_not(None)), new.detail), else_=table.c.detail
                    ),
                },
            )
        )


async def totals(session: AsyncSession) -> list[CounterTotal]:
    """Every shared counter's total."""
    rows = await session.execute(
        select(
            ServiceCounterRow.name,
            ServiceCounterRow.label,
            ServiceCounterRow.value,
            ServiceCounterRow.last_at,
            ServiceCounterRow.detail,
        ).order_by(ServiceCounterRow.name, ServiceCounterRow.label)
    )
    return [CounterTotal(r.name, r.label, int(r.value), r.last_at, r.detail) for r in rows]
