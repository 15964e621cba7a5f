"""Memory rows as records, and the scope conditions every memory statement is built from.

Every read takes a required `scope`; the scope filter is part of the SQL statement
(DESIGN §3), so a query can never see another owner's rows.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    and_,
    bindparam,
    select,
    tuple_,
    union_all,
)

from service.core.records import (
    Bank,
    Candidate,
    Memory,
    OwnerKind,
    ReadScope,
    Scope,
    SourceKind,
    Status,
)
from service.storage.tables import MemoryRow

# value → member, looked up directly: calling the enum class cost more than the rest of a row
_OWNER_KINDS = {m.value: m for m in OwnerKind}


_BANKS = {m.value: m for m in Bank}


STATUSES = {m.value: m for m in Status}


_SOURCE_KINDS = {m.value: m for m in SourceKind}


TABLE = MemoryRow.__table__


RECORD_COLUMNS = tuple(c for c in TABLE.c if c.name not in ("embedding", "tsv"))
"""Every column a `Memory` record needs: not the vector, not the full-text vector."""


_RECORD_VALUES = operator.itemgetter(
    *(
        [c.name for c in RECORD_COLUMNS].index(name)
        for name in (
            "id",
            "seq",
            "owner_kind",
            "owner_id",
            "bank",
            "content",
            "tags",
            "confidence",
            "status",
            "source_kind",
            "source_chat_id",
            "source_message_id",
            "created_at",
            "updated_at",
            "last_used_at",
            "superseded_by",
            "version",
            "summary_of",
        )
    )
)


def to_record(row: Any) -> Memory:
    """A frozen record from an ORM row, or from a result row with the same column names.

    Raises:
        ValueError: a stored owner kind, bank, status or source kind this version lacks.
    """
    return record_from_row([getattr(row, column.name) for column in RECORD_COLUMNS])


def record_from_row(row: Any) -> Memory:
    """`to_record` for a result row whose first columns are RECORD_COLUMNS, read by position.

    The read path turns about a hundred rows into records per turn; by position is several
    times cheaper than by name.

    Raises:
        ValueError: a stored owner kind, bank, status or source kind this version lacks.
    """
    (
        id_,
        seq,
        owner_kind,
        owner_id,
        bank,
        content,
        tags,
        confidence,
        status,
        source_kind,
        chat_id,
        message_id,
        created_at,
        updated_at,
        last_used_at,
        superseded_by,
        version,
        summary_of,
    ) = _RECORD_VALUES(row)
    return Memory(
        id=id_,
        seq=seq,
        owner_kind=_OWNER_KINDS.get(owner_kind) or OwnerKind(owner_kind),
        owner_id=owner_id,
        bank=_BANKS.get(bank) or Bank(bank),
        content=content,
        tags=tuple(tags or ()),
        confidence=confidence,
        status=STATUSES.get(status) or Status(status),
        source_kind=_SOURCE_KINDS.get(source_kind) or SourceKind(source_kind),
        source_chat_id=chat_id,
        source_message_id=message_id,
        created_at=created_at,
        updated_at=updated_at,
        last_used_at=last_used_at,
        superseded_by=superseded_by,
        version=version,
        merged_from=len(summary_of or ()),
    )


def scope_filter(scope: ReadScope) -> ColumnElement[bool]:
    """SQL condition matching exactly the (owner_kind, owner_id, bank) cells of `scope`."""
    if not scope:
        return and_(False)  # type: ignore[arg-type]
    cells = [(s.owner_kind.value, s.owner_id, s.bank.value) for s in scope.scopes]
    return tuple_(MemoryRow.owner_kind, MemoryRow.owner_id, MemoryRow.bank).in_(cells)


def query_vector_param(vector: np.ndarray | None = None) -> BindParameter[Any]:
    """The `:query_vector` parameter, a (d,) float32 vector; None binds NULL."""
    return bindparam(
        "query_vector",
        None if vector is None else np.asarray(vector, dtype=np.float32),
        type_=Vector(),
    )


def active_in(scope: ReadScope) -> ColumnElement[bool]:
    """SQL condition: an active memory in one of `scope`'s cells."""
    return and_(scope_filter(scope), TABLE.c.status == Status.ACTIVE.value)


def active_cell(cell: Scope) -> ColumnElement[bool]:
    """SQL condition: an active memory of exactly this cell."""
    return and_(
        TABLE.c.owner_kind == cell.owner_kind.value,
        TABLE.c.owner_id == cell.owner_id,
        TABLE.c.bank == cell.bank.value,
        TABLE.c.status == Status.ACTIVE.value,
    )


def owned(scope: ReadScope, statuses: Sequence[Status]) -> Select[MemoryRow]:
    """Memories of `scope`'s cells whose status is one of `statuses`."""
    return select(MemoryRow).where(
        scope_filter(scope), MemoryRow.status.in_([s.value for s in statuses])
    )


def cell_param(prefix: str) -> ColumnElement[bool]:
    """SQL condition: an active memory of the cell bound as `{prefix}_kind/_owner/_bank`."""
    # equalities whose bound values imply the predicate of the cell's own partial indexes
    return and_(
        TABLE.c.owner_kind == bindparam(f"{prefix}_kind"),
        TABLE.c.owner_id == bindparam(f"{prefix}_owner"),
        TABLE.c.bank == bindparam(f"{prefix}_bank"),
        TABLE.c.status == Status.ACTIVE.value,
    )


def union_parts(parts: list[Select[Any]]) -> Any:
    """One SELECT, or the UNION ALL of several."""
    return union_all(*parts) if len(parts) > 1 else parts[0]


def to_candidate(
    row: Any,
    distance: float | None,
    text_rank: float | None = None,
    memory: Memory | None = None,
    text_terms: int | None = None,
    text_idf: float | None = None,
) -> Candidate:
    """A candidate from a row whose first columns are RECORD_COLUMNS (or its `memory`)."""
    d = 2.0 if distance is None else float(distance)
    return Candidate(
        memory=memory or record_from_row(row),
        similarity=similarity_from_distance(d),
        cosine=1.0 - d,
        text_rank=text_rank,
        text_terms=text_terms,
        text_idf=text_idf,
    )


def similarity_from_distance(distance: float) -> float:
    """Relevance in [0, 1] from pgvector's cosine distance in [0, 2]: 1 − d / 2.

    The founding design's conversion (seeds/001), under which its 0.7 and 0.93 thresholds
    are meant: 0.7 ⇔ cosine 0.4, 0.93 ⇔ cosine 0.86.
    """
    return max(0.0, min(1.0, 1.0 - float(distance) / 2.0))
