"""Memory rows: insert, exact per-owner vector search, listing and lifecycle changes.

Every read takes a required `scope`; the scope filter is part of the SQL statement
(DESIGN §3), so a query can never see another owner's rows.
"""

from __future__ import annotations

import functools
import itertools
import operator
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Float,
    Integer,
    Label,
    Select,
    Text,
    TextClause,
    and_,
    bindparam,
    cast,
    false,
    func,
    literal_column,
    null,
    or_,
    select,
    true,
    tuple_,
    union_all,
    update,
)
from sqlalchemy import text as sa_text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from service.core import assistants
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
from service.storage.owner_indexes import IndexedCells
from service.storage.tables import MemoryRow, PostingRow, TermCellRow

# value → member, looked up directly: calling the enum class cost more than the rest of a row
_OWNER_KINDS = {m.value: m for m in OwnerKind}
_BANKS = {m.value: m for m in Bank}
_STATUSES = {m.value: m for m in Status}
_SOURCE_KINDS = {m.value: m for m in SourceKind}


def to_record(row: Any) -> Memory:
    """A frozen record from an ORM row, or from a result row with the same column names.

    Raises:
        ValueError: a stored owner kind, bank, status or source kind this version lacks.
    """
    return record_from_row([getattr(row, column.name) for column in RECORD_COLUMNS])


def scope_filter(scope: ReadScope) -> ColumnElement[bool]:
    """SQL condition matching exactly the (owner_kind, owner_id, bank) cells of `scope`."""
    if not scope:
        return and_(False)  # type: ignore[arg-type]
    cells = [(s.owner_kind.value, s.owner_id, s.bank.value) for s in scope.scopes]
    return tuple_(MemoryRow.owner_kind, MemoryRow.owner_id, MemoryRow.bank).in_(cells)


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
    return to_record(row)


async def search(
    session: AsyncSession, *, scope: ReadScope, query_vector: np.ndarray, limit: int
) -> list[Candidate]:
    """The `limit` active memories nearest to `query_vector` within `scope`, exact.

    The inner `OFFSET 0` fences the ORDER BY away from any approximate index, so the result
    is always the true top-k of the owner's rows (min(limit, rows) rows).

    Args:
        query_vector: (dimension,) float32, L2-normalized.

    Returns:
        Candidates nearest first; similarity = 1 − cosine_distance / 2 in [0, 1].
    """
    if not scope or limit <= 0:
        return []
    return await _exact_candidates(session, _active_in(scope), _query_vector(query_vector), limit)


_TABLE = MemoryRow.__table__
RECORD_COLUMNS = tuple(c for c in _TABLE.c if c.name not in ("embedding", "tsv"))
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
        status=_STATUSES.get(status) or Status(status),
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


def _query_vector(vector: np.ndarray | None = None) -> BindParameter[Any]:
    return bindparam(
        "query_vector",
        None if vector is None else np.asarray(vector, dtype=np.float32),
        type_=Vector(),
    )


def _active_in(scope: ReadScope) -> ColumnElement[bool]:
    return and_(scope_filter(scope), _TABLE.c.status == Status.ACTIVE.value)


def _active_cell(cell: Scope) -> ColumnElement[bool]:
    return and_(
        _TABLE.c.owner_kind == cell.owner_kind.value,
        _TABLE.c.owner_id == cell.owner_id,
        _TABLE.c.bank == cell.bank.value,
        _TABLE.c.status == Status.ACTIVE.value,
    )


def _exact_nearest(
    where: ColumnElement[bool], vector: BindParameter[Any], limit: Any
) -> Select[Any]:
    """(seq, distance) of the `limit` nearest rows matching `where`, by an exact scan.

    Only the sequence number and the distance go through the sort: carrying whole rows
    (a 384-d vector is 1.5 kB) through it cost about 40 % more at 10k rows.
    """
    inner = (
        select(_TABLE.c.seq, _TABLE.c.embedding.cosine_distance(vector).label("distance"))
        .where(where, _TABLE.c.embedding.is_not(None))
        .offset(0)
        .subquery()
    )
    return (
        select(inner.c.seq, inner.c.distance).order_by(inner.c.distance, inner.c.seq).limit(limit)
    )


async def _exact_candidates(
    session: AsyncSession, where: ColumnElement[bool], vector: BindParameter[Any], limit: int
) -> list[Candidate]:
    nearest = _exact_nearest(where, vector, limit).subquery()
    stmt = (
        select(*RECORD_COLUMNS, nearest.c.distance)
        .join_from(nearest, _TABLE, _TABLE.c.seq == nearest.c.seq)
        .order_by(nearest.c.distance, nearest.c.seq)
    )
    return [_candidate(row, row.distance) for row in (await session.execute(stmt)).all()]


def _rank(row: Any) -> float | None:
    """The row's BM25 score when the statement computed one (it matched a word)."""
    rank = getattr(row, "rank", None)
    return None if rank is None else float(rank)


def _candidate(
    row: Any, distance: float | None, text_rank: float | None = None, memory: Memory | None = None
) -> Candidate:
    """A candidate from a row whose first columns are RECORD_COLUMNS (or its `memory`)."""
    d = 2.0 if distance is None else float(distance)
    return Candidate(
        memory=memory or record_from_row(row),
        similarity=similarity_from_distance(d),
        cosine=1.0 - d,
        text_rank=text_rank,
    )


def similarity_from_distance(distance: float) -> float:
    """Relevance in [0, 1] from pgvector's cosine distance in [0, 2]: 1 − d / 2.

    The founding design's conversion (seeds/001), under which its 0.7 and 0.93 thresholds
    are meant: 0.7 ⇔ cosine 0.4, 0.93 ⇔ cosine 0.86.
    """
    return max(0.0, min(1.0, 1.0 - float(distance) / 2.0))


def _owned(scope: ReadScope, statuses: Sequence[Status]) -> Select[MemoryRow]:
    return select(MemoryRow).where(
        scope_filter(scope), MemoryRow.status.in_([s.value for s in statuses])
    )


async def get(
    session: AsyncSession,
    *,
    scope: ReadScope,
    memory_id: uuid.UUID,
    statuses: Sequence[Status] = (Status.ACTIVE,),
) -> Memory | None:
    """The memory with `memory_id` if it lies in `scope` and has one of `statuses`."""
    row = (await session.execute(_owned(scope, statuses).where(MemoryRow.id == memory_id))).scalar()
    return to_record(row) if row else None


async def get_by_seq(
    session: AsyncSession,
    *,
    scope: ReadScope,
    seq: int,
    statuses: Sequence[Status] = (Status.ACTIVE,),
) -> Memory | None:
    """The memory with short id `seq` if it lies in `scope` and has one of `statuses`."""
    row = (await session.execute(_owned(scope, statuses).where(MemoryRow.seq == seq))).scalar()
    return to_record(row) if row else None


_OR_QUERY_SQL = """(SELECT
  to_tsquery('simple', replace(plainto_tsquery('english', :fts_text)::text, '&', '|'))
  || to_tsquery('simple', coalesce((
       SELECT string_agg(quote_literal(word), ' | ')
       FROM unnest(tsvector_to_array(to_tsvector('simple', :fts_text))) AS word
       WHERE ts_lexize('english_stem', word) <> '{}'::text[]), '')))"""


def or_query(text: str | None) -> TextClause:
    """tsquery matching any word of `text`, English-stemmed or as written.

    The halves match the two halves of the stored tsvector ('english' || 'simple'): stems
    find "bikes" for "bike", words as written find names, ids and other languages. English
    stop words are left out of both, so "the a of" matches nothing.

    It is a scalar subquery, so PostgreSQL computes it once per statement (an InitPlan);
    as a plain expression it was parsed again for every row (about 5 µs a row).
    """
    return sa_text(_OR_QUERY_SQL).bindparams(
        bindparam("fts_text", None if text is None else text[:2_000], type_=Text)
    )


async def keyword_search(
    session: AsyncSession,
    *,
    scope: ReadScope,
    text: str,
    limit: int,
    query_vector: np.ndarray | None = None,
) -> list[Candidate]:
    """Active memories in `scope` sharing words with `text`, best `ts_rank` first.

    Args:
        query_vector: (dimension,) float32; when given, each result also carries its
            similarity to it (memories without a vector get similarity 0).

    Returns:
        Candidates with `text_rank` set; [] when `text` has no searchable word.
    """
    if not scope or limit <= 0 or not text.strip():
        return []
    best = _exact_keyword(_active_in(scope), or_query(text), limit).subquery()
    columns: list[Any] = [*RECORD_COLUMNS, best.c.rank]
    if query_vector is not None:
        columns.append(
            _TABLE.c.embedding.cosine_distance(_query_vector(query_vector)).label("distance")
        )
    stmt = (
        select(*columns)
        .join_from(best, _TABLE, _TABLE.c.seq == best.c.seq)
        .order_by(best.c.rank.desc(), best.c.seq)
    )
    return [
        _candidate(
            row, row.distance if query_vector is not None else None, text_rank=float(row.rank)
        )
        for row in (await session.execute(stmt)).all()
    ]


def _exact_keyword(where: ColumnElement[bool], query: Any, limit: Any) -> Select[Any]:
    """(seq, rank) of the `limit` best full-text matches among the rows matching `where`.

    The owner's rows first (btree), then the text match on them: behind the OFFSET 0 fence
    the planner cannot start from the GIN index over every owner's rows, so the cost
    follows the user's memory count, not the table's.
    """
    owned = select(_TABLE.c.seq, _TABLE.c.tsv).where(where).offset(0).subquery()
    rank = func.ts_rank(owned.c.tsv, query).label("rank")
    return (
        select(owned.c.seq, rank)
        .where(owned.c.tsv.op("@@")(query))
        .order_by(rank.desc(), owned.c.seq)
        .limit(limit)
    )


# -- candidates of the read path: both lists in one statement -------------------------------


@dataclass(frozen=True, slots=True)
class CandidateSets:
    """The vector and the full-text candidates of one query, before fusion."""

    semantic: list[Candidate]  #: nearest first (ties: earlier stored first)
    keyword: list[Candidate]  #: best Okapi BM25 first (ties: earlier stored first)
    exact_fallbacks: int = 0  #: cells whose HNSW index gave too few rows, searched exactly


HNSW_MAX_EF_SEARCH = 1_000
"""pgvector's upper bound of `hnsw.ef_search`."""


def hnsw_ef_search(floor: int, limit: int) -> int:
    """`hnsw.ef_search` for a scan asked for `limit` rows: max(floor, 2 × limit), ≤ 1,000."""
    return min(max(floor, 2 * limit), HNSW_MAX_EF_SEARCH)


async def candidates(
    session: AsyncSession,
    *,
    scope: ReadScope,
    query_vector: np.ndarray,
    text: str,
    limit: int,
    indexed: IndexedCells | None = None,
) -> CandidateSets:
    """The `limit` nearest memories and the `limit` best full-text matches in `scope`.

    One statement gives both lists, each memory's row once. Cells of `scope` with their own
    indexes (`indexed`, see `storage.owner_indexes`) are searched through them: HNSW for
    vectors (approximate; `hnsw.ef_search` is set for the transaction to at least 2 ×
    `limit`); the other cells are searched together by an exact scan behind an `OFFSET 0`
    fence. Full text is ranked by Okapi BM25 over every cell's postings (`_bm25`). A cell
    whose HNSW scan yields fewer than `limit` rows — its
    graph still holds rows archived since it was built, or the index is gone — is searched
    again exactly, so a heavy cell never comes back short.

    Args:
        query_vector: (dimension,) float32, L2-normalized.
        text: the query's text for full-text search; blank = no full-text candidates.
        indexed: cells with usable per-owner indexes; None = exact scans only.

    Returns:
        Both lists (similarity = 1 − cosine_distance / 2; full-text matches without a
        vector get similarity 0) and how many cells fell back to the exact scan.
    """
    if not scope or limit <= 0:
        return CandidateSets([], [])
    indexed = indexed or IndexedCells()
    ann = [cell for cell in scope.scopes if cell in indexed.ann]
    rest = [cell for cell in scope.scopes if cell not in indexed.ann]
    with_text = bool(text.strip())
    shape = _Shape(
        bool(rest),
        len(ann),
        len(scope.scopes) if with_text else 0,
        indexed.dimension if ann else 0,
    )
    params: dict[str, Any] = {
        "query_vector": np.asarray(query_vector, dtype=np.float32),
        "limit": limit,
        "model": indexed.model,
    }
    if rest:
        params["nearest_cells"] = _cell_tuples(rest)
    if with_text:
        params["fts_text"] = text[:2_000]
    for prefix, cells in (("ann", ann), ("txt", scope.scopes if with_text else [])):
        for i, cell in enumerate(cells):
            params |= {
                f"{prefix}{i}_kind": cell.owner_kind.value,
                f"{prefix}{i}_owner": cell.owner_id,
                f"{prefix}{i}_bank": cell.bank.value,
            }
    if ann:
        ef_search = str(hnsw_ef_search(indexed.ef_search, limit))
        started_with = (await session.connection()).info.get("server_settings", {})
        if started_with.get("hnsw.ef_search") != ef_search:  # else one round trip saved
            await session.execute(select(func.set_config("hnsw.ef_search", ef_search, True)))
    rows = (await session.execute(_candidates_statement(shape), params)).all()

    by_branch: dict[int, list[Any]] = {branch: [] for branch in range(len(ann) + 1)}
    keyword_rows = []
    for row in rows:
        if row.branch is not None:
            by_branch[row.branch].append(row)
        if with_text and row.keyword_hit:
            keyword_rows.append(row)
    fallbacks = 0
    for branch, cell in enumerate(ann, start=1):
        if len(by_branch[branch]) < limit:
            fallbacks += 1
            exact = _exact_nearest(
                _active_cell(cell), _query_vector(query_vector), limit
            ).subquery()
            by_branch[branch] = list(
                (
                    await session.execute(
                        select(*RECORD_COLUMNS, exact.c.distance).join_from(
                            exact, _TABLE, _TABLE.c.seq == exact.c.seq
                        )
                    )
                ).all()
            )
    nearest = sorted(
        (row for part in by_branch.values() for row in part),
        key=lambda row: (row.distance, row.seq),
    )[:limit]
    keyword_rows.sort(key=lambda row: (-row.rank, row.seq))
    keyword_rows = keyword_rows[:limit]
    # a memory in both lists becomes one record
    records = {row.seq: record_from_row(row) for row in itertools.chain(nearest, keyword_rows)}
    return CandidateSets(
        semantic=[
            _candidate(row, row.distance, text_rank=_rank(row), memory=records[row.seq])
            for row in nearest
        ],
        keyword=[
            _candidate(row, row.distance, text_rank=float(row.rank), memory=records[row.seq])
            for row in keyword_rows
        ],
        exact_fallbacks=fallbacks,
    )


@dataclass(frozen=True, slots=True)
class _Shape:
    """What decides the text of the candidates statement (its values are parameters)."""

    exact_nearest: bool  #: some cells are searched by the exact vector scan
    ann_cells: int  #: cells searched through their HNSW index
    text_cells: int  #: cells whose postings are read (0: the query has no text to match)
    dimension: int  #: dimension the HNSW indexes cast to (0 without them)


def _cell_tuples(cells: Sequence[Scope]) -> list[tuple[str, str, str]]:
    return [(c.owner_kind.value, c.owner_id, c.bank.value) for c in cells]


def _cell_param(prefix: str) -> ColumnElement[bool]:
    # equalities whose bound values imply the predicate of the cell's own partial indexes
    return and_(
        _TABLE.c.owner_kind == bindparam(f"{prefix}_kind"),
        _TABLE.c.owner_id == bindparam(f"{prefix}_owner"),
        _TABLE.c.bank == bindparam(f"{prefix}_bank"),
        _TABLE.c.status == Status.ACTIVE.value,
    )


def _cells_param(name: str) -> ColumnElement[bool]:
    cells = tuple_(_TABLE.c.owner_kind, _TABLE.c.owner_id, _TABLE.c.bank)
    return and_(cells.in_(bindparam(name, expanding=True)), _TABLE.c.status == Status.ACTIVE.value)


@functools.lru_cache(maxsize=128)
def _candidates_statement(shape: _Shape) -> Select[Any]:
    """The candidates statement of one shape, built once (building one costs about 2 ms).

    Parameters: query_vector, limit, model, nearest_cells (a list of (owner_kind, owner_id,
    bank)), fts_text, and ann<i>_/txt<i>_ kind, owner and bank.
    """
    vector = _query_vector()
    limit = bindparam("limit", type_=Integer)
    branch: Label[int] = literal_column("0").label("branch")
    nearest_parts: list[Select[Any]] = []
    if shape.exact_nearest:
        exact = _exact_nearest(_cells_param("nearest_cells"), vector, limit).subquery()
        nearest_parts.append(select(exact.c.seq, exact.c.distance, branch))
    if shape.ann_cells:
        typed = Vector(shape.dimension)
        # exactly the index's expression, and nothing else in ORDER BY, or the index is unused
        distance = cast(_TABLE.c.embedding, typed).cosine_distance(cast(vector, typed))
        for i in range(shape.ann_cells):
            nearest_parts.append(
                select(
                    _TABLE.c.seq,
                    distance.label("distance"),
                    literal_column(str(i + 1)).label("branch"),
                )
                .where(_cell_param(f"ann{i}"), _TABLE.c.embedding_model == bindparam("model"))
                .order_by(distance)
                .limit(limit)
            )
    nearest = _union(nearest_parts).cte("nearest")
    columns: list[Any] = [
        *RECORD_COLUMNS,
        _TABLE.c.embedding.cosine_distance(vector).label("distance"),
        nearest.c.branch,
    ]
    if not shape.text_cells:
        found = select(nearest.c.seq).subquery("found")
        return (
            select(*columns)
            .select_from(found)
            .join(_TABLE, _TABLE.c.seq == found.c.seq)
            .join(nearest, nearest.c.seq == found.c.seq)
        )
    # the query's lexemes once, in a CTE (planning time, the driver's 4 kB query cache)
    tsquery = (
        sa_text(f"SELECT {_TERMS_SQL} AS terms")
        .bindparams(bindparam("fts_text", type_=Text))
        .columns(literal_column("terms"))
        .cte("tsquery")
    )
    terms = select(tsquery.c.terms).scalar_subquery()
    scored = _bm25(terms, shape.text_cells).cte("scored")
    # one row per memory from both lists by a grouping, not by joins: the planner cannot
    # size CTEs and nested-looped them (28k comparisons at 400 matches). A nearest row that
    # matches words but is not among the best `limit` keeps its BM25 score too (the fusion
    # normalises over every candidate); `keyword_hit` marks the best `limit` matches.
    # the best `limit` by a top-N sort, and the nearest rows' own scores by a semi-join: the
    # grouping below then sees about 2 × `limit` rows, not every match
    best = (
        select(scored.c.seq, scored.c.rank, true().label("top"))
        .order_by(scored.c.rank.desc(), scored.c.seq)
        .limit(limit)
        .subquery("best")
    )
    both = union_all(
        select(
            nearest.c.seq,
            nearest.c.branch,
            cast(null(), Float).label("rank"),
            false().label("top"),
        ),
        select(best.c.seq, cast(null(), Integer), best.c.rank, best.c.top),
        select(scored.c.seq, cast(null(), Integer), scored.c.rank, false()).where(
            scored.c.seq.in_(select(nearest.c.seq))
        ),
    ).subquery("both")
    found = (
        select(
            both.c.seq,
            func.max(both.c.branch).label("branch"),
            func.max(both.c.rank).label("rank"),
            func.bool_or(both.c.top).label("keyword_hit"),
        )
        .group_by(both.c.seq)
        .having(or_(func.max(both.c.branch).is_not(None), func.bool_or(both.c.top)))
        .subquery("found")
    )
    return (
        select(
            *RECORD_COLUMNS,
            _TABLE.c.embedding.cosine_distance(vector).label("distance"),
            found.c.branch,
            found.c.rank,
            found.c.keyword_hit,
        )
        .select_from(found)
        .join(_TABLE, _TABLE.c.seq == found.c.seq)
    )


BM25_K1 = 0.9
"""Okapi BM25 term-frequency saturation; chosen on LoCoMo conversations 0–4 (grid 0.6–2.0,
docs/performance.md)."""
BM25_B = 0.4
"""Okapi BM25 length normalisation; chosen with BM25_K1 (grid 0.3–0.9)."""

# the query's lexemes, as `_OR_QUERY_SQL` matches them: English stems and words as written
_TERMS_SQL = """ARRAY(
  SELECT unnest(tsvector_to_array(to_tsvector('english', :fts_text)))
  UNION SELECT word FROM unnest(tsvector_to_array(to_tsvector('simple', :fts_text))) AS word
  WHERE ts_lexize('english_stem', word) <> '{}'::text[])"""


def _bm25(terms: Any, cells: int) -> Select[Any]:
    """(seq, rank): Okapi BM25 of each memory of cells txt0…txt<cells−1> holding a query
    lexeme (Robertson and Zaragoza 2009).

    rank = Σ_t idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·dl / avgdl)) over the query's
    lexemes t in the memory, idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5)), from the postings
    and bank statistics the triggers of migration 0014 keep (`memory_postings`,
    `memory_term_cells`): N = the scope's active memories, df = those holding t, tf = t's
    positions in the memory's tsvector ('english' || 'simple', so a word whose stem is
    itself counts twice), dl = the memory's distinct lexemes, avgdl = their mean over the
    matched memories (as before the postings: the ranking is unchanged). Each cell's
    postings of the query's lexemes are one index-only range scan per lexeme: the cost
    follows the matches, not the bank's size.
    """
    post = PostingRow.__table__.c
    stat = TermCellRow.__table__.c
    lexemes = cast(terms, ARRAY(Text))  # a cast: ANY (subquery) would compare whole arrays
    parts = [
        select(post.seq, post.lexeme, post.tf, post.dl).where(
            *_cell_keys(post, f"txt{i}"), post.lexeme == func.any(lexemes)
        )
        for i in range(cells)
    ]
    postings = _union(parts).cte("postings")
    in_scope = or_(*(and_(*_cell_keys(stat, f"txt{i}")) for i in range(cells)))
    # double precision throughout: ln() of numeric costs about 25 µs a call
    n = cast(select(func.sum(stat.docs)).where(in_scope).scalar_subquery(), Float)
    # the mean length over the matched memories, as the ranking tuned on LoCoMo 0–4 had it
    # (the scope's mean, `memory_term_cells.lexemes` / N, would change that ranking)
    lengths = (
        select(func.max(postings.c.dl).label("dl")).group_by(postings.c.seq).subquery("lengths")
    )
    avgdl = select(cast(func.avg(lengths.c.dl), Float)).scalar_subquery()
    # idf once per lexeme (df = its postings in the scope), not once per posting
    df = cast(func.count(), Float)
    idfs = (
        select(postings.c.lexeme, func.ln(1.0 + (n - df + 0.5) / (df + 0.5)).label("idf"))
        .group_by(postings.c.lexeme)
        .cte("idfs")
    )
    hits = (
        select(
            postings.c.seq,
            cast(postings.c.tf, Float).label("tf"),
            cast(postings.c.dl, Float).label("dl"),
            idfs.c.idf,
        )
        .join_from(postings, idfs, idfs.c.lexeme == postings.c.lexeme)
        .cte("hits")
    )
    idf = hits.c.idf
    k1: ColumnElement[float] = literal_column(repr(BM25_K1), Float)
    b: ColumnElement[float] = literal_column(repr(BM25_B), Float)
    weight = idf * hits.c.tf * (k1 + 1) / (hits.c.tf + k1 * (1 - b + b * hits.c.dl / avgdl))
    return select(hits.c.seq, func.sum(weight).label("rank")).group_by(hits.c.seq)


def _cell_keys(columns: Any, prefix: str) -> list[ColumnElement[bool]]:
    return [
        columns.owner_kind == bindparam(f"{prefix}_kind"),
        columns.owner_id == bindparam(f"{prefix}_owner"),
        columns.bank == bindparam(f"{prefix}_bank"),
    ]


def _union(parts: list[Select[Any]]) -> Any:
    return union_all(*parts) if len(parts) > 1 else parts[0]


MAX_PHRASES = 60
"""Most `;`-separated phrases one keyword search takes (seeds/002's term cap)."""


def split_phrases(text: str) -> list[str]:
    """`a; b c; ;d` → ["a", "b c", "d"]: non-empty phrases, at most MAX_PHRASES."""
    phrases = [" ".join(p.split()) for p in text.split(";")]
    return [p[:200] for p in phrases if p][:MAX_PHRASES]


async def phrase_search(
    session: AsyncSession, *, scope: ReadScope, phrases: Sequence[str], limit: int
) -> list[Candidate]:
    """Active memories in `scope` containing any of `phrases` (each matched as a phrase,
    English-stemmed or as written), best `ts_rank` first.

    `phraseto_tsquery` parses plain text, so quotes, operators and other characters in a
    phrase never make a query invalid.
    """
    phrases = [p for p in phrases if p.strip()][:MAX_PHRASES]
    if not scope or limit <= 0 or not phrases:
        return []
    parts: list[ColumnElement[Any]] = [
        func.phraseto_tsquery(
            literal_column(f"'{config}'::regconfig"),
            bindparam(f"phrase_{config}_{i}", phrase, type_=Text),
        )
        for i, phrase in enumerate(phrases)
        for config in ("english", "simple")
    ]
    query = parts[0]
    for part in parts[1:]:
        query = query.op("||")(part)
    rank = func.ts_rank(MemoryRow.tsv, query).label("rank")
    stmt = (
        select(MemoryRow, rank)
        .where(
            scope_filter(scope),
            MemoryRow.status == Status.ACTIVE.value,
            MemoryRow.tsv.op("@@")(query),
        )
        .order_by(rank.desc(), MemoryRow.seq)
        .limit(limit)
    )
    return [
        Candidate(memory=to_record(row), similarity=0.0, cosine=0.0, text_rank=float(r))
        for row, r in (await session.execute(stmt.options(defer(MemoryRow.embedding)))).all()
    ]


async def export_rows(session: AsyncSession, *, scope: ReadScope) -> list[Memory]:
    """Every memory in `scope` that still has content (active, superseded, archived)."""
    stmt = _owned(scope, (Status.ACTIVE, Status.SUPERSEDED, Status.ARCHIVED)).order_by(
        MemoryRow.seq
    )
    return [to_record(r) for r in (await session.execute(stmt)).scalars()]


async def list_memories(
    session: AsyncSession,
    *,
    scope: ReadScope,
    limit: int,
    offset: int,
    statuses: Sequence[Status] = (Status.ACTIVE,),
) -> tuple[list[Memory], int]:
    """A page of memories in `scope`, newest first, and the total count."""
    base = _owned(scope, statuses)
    total = (await session.execute(select(func.count()).select_from(base.subquery()))).scalar_one()
    rows = (
        await session.execute(
            base.order_by(MemoryRow.created_at.desc(), MemoryRow.seq.desc())
            .limit(limit)
            .offset(offset)
        )
    ).scalars()
    return [to_record(r) for r in rows], int(total)


_PAIRWISE_SQL = sa_text("""
WITH picked AS (
  SELECT s.i, m.embedding
  FROM unnest(CAST(:seqs AS bigint[])) WITH ORDINALITY AS s(seq, i)
  LEFT JOIN memories m ON m.seq = s.seq)
SELECT string_agg(float8send(coalesce(1 - (a.embedding <=> b.embedding), 0)), ''::bytea
                  ORDER BY a.i, b.i)
FROM picked a JOIN picked b ON a.i < b.i""")


async def pairwise_similarity(session: AsyncSession, *, seqs: Sequence[int]) -> np.ndarray:
    """Cosine similarities between memories, computed inside PostgreSQL.

    The upper triangle comes back as one value, big-endian float64s in row order: one row
    per pair took about 2 ms more for 40 memories, in row handling alone.

    Returns:
        (n, n) float64 aligned with `seqs`; 1 on the diagonal, 0 where a vector is missing.
    """
    n = len(seqs)
    matrix = np.eye(n, dtype=np.float64)
    if n < 2:
        return matrix
    packed = (await session.execute(_PAIRWISE_SQL, {"seqs": [int(s) for s in seqs]})).scalar_one()
    upper = np.triu_indices(n, k=1)
    values = np.frombuffer(packed, dtype=">f8").astype(np.float64)
    matrix[upper] = values
    matrix[upper[1], upper[0]] = values
    return matrix


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
    return [record_from_row(r) for r in rows]


@functools.lru_cache(maxsize=16)
def _core_statement(cells: int) -> Select[Any]:
    limit = bindparam("limit", type_=Integer)
    order = (_TABLE.c.confidence.desc(), _TABLE.c.created_at.desc(), _TABLE.c.seq.desc())
    best = _union(
        [
            select(*RECORD_COLUMNS).where(_cell_param(f"core{i}")).order_by(*order).limit(limit)
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
    stmt = select(func.count()).where(scope_filter(scope), MemoryRow.status == Status.ACTIVE.value)
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
        row.id: RowState(_STATUSES.get(row.status) or Status(row.status), int(row.version))
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


async def tombstone(
    session: AsyncSession, *, memory_ids: Sequence[uuid.UUID], at: datetime
) -> None:
    """Forget memories: remove content, tags, vectors and full text; keep a content-free row."""
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
        scope_filter(scope),
        MemoryRow.source_chat_id == chat_id,
        MemoryRow.source_message_id == message_id,
    ]
    active = select(MemoryRow).where(
        *where, MemoryRow.status == Status.ACTIVE.value, MemoryRow.tags.contains([tag])
    )
    rows = [to_record(r) for r in (await session.execute(active.order_by(MemoryRow.seq))).scalars()]
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
