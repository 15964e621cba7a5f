"""The read path's candidates: the nearest vectors and the best Okapi BM25 matches of one
scope, both lists from one statement (per-owner HNSW indexes where a cell has them).

The scope's cells are bound parameters of every branch (DESIGN §3).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    Label,
    Select,
    Text,
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
)
from sqlalchemy import text as sa_text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from service.core.records import (
    Candidate,
    ReadScope,
    Scope,
    Status,
)
from service.storage import memory_rows, memory_search
from service.storage.owner_indexes import IndexedCells
from service.storage.tables import PostingRow, TermCellRow


@dataclass(frozen=True, slots=True)
class CandidateSets:
    """The vector and the full-text candidates of one query, before fusion."""

    semantic: list[Candidate]  #: nearest first (ties: earlier stored first)
    keyword: list[Candidate]  #: best Okapi BM25 first (ties: earlier stored first)
    exact_fallbacks: int = 0  #: cells whose HNSW index gave too few rows, searched exactly
    #: the query's distinct lexemes (English stems and words as written, `_TERMS_SQL`);
    #: with each candidate's `text_terms`, how much of the query its words cover
    query_terms: int = 0
    #: Σ idf over the query's lexemes (absent ones at the largest idf, df = 0); with each
    #: candidate's `text_idf`, how much of the query's rare words its words cover
    query_idf: float = 0.0


HNSW_MAX_EF_SEARCH = 1_000
"""pgvector's upper bound of `hnsw.ef_search`."""


def _autocommit(connection: AsyncConnection) -> bool:
    sync = connection.sync_connection
    return sync is not None and sync.get_execution_options().get("isolation_level") == "AUTOCOMMIT"


def hnsw_ef_search(floor: int, limit: int) -> int:
    """`hnsw.ef_search` for a scan asked for `limit` rows: max(floor, 2 × limit), ≤ 1,000."""
    return min(max(floor, 2 * limit), HNSW_MAX_EF_SEARCH)


def _statement_params(
    query_vector: np.ndarray,
    text: str,
    limit: int,
    indexed: IndexedCells,
    ann: list[Scope],
    rest: list[Scope],
    scope: ReadScope,
) -> dict[str, Any]:
    """The bind parameters of `_candidates_statement`: the vector, the limit, the exact
    scan's cells, the full-text query (cut to 2,000 characters) and one triple per cell of
    each HNSW and full-text branch. `text` is "" when there is no full-text search.
    """
    params: dict[str, Any] = {
        "query_vector": np.asarray(query_vector, dtype=np.float32),
        "limit": limit,
        "model": indexed.model,
    }
    if rest:
        params["nearest_cells"] = _cell_tuples(rest)
    if text:
        params["fts_text"] = text[:2_000]
    for prefix, cells in (("ann", ann), ("txt", scope.scopes if text else [])):
        for i, cell in enumerate(cells):
            params |= {
                f"{prefix}{i}_kind": cell.owner_kind.value,
                f"{prefix}{i}_owner": cell.owner_id,
                f"{prefix}{i}_bank": cell.bank.value,
            }
    return params


async def _set_ef_search(session: AsyncSession, ef_search: int) -> None:
    """Set `hnsw.ef_search` for this transaction, unless the connection started with it.

    Raises:
        RuntimeError: on an autocommit connection, where the setting would end with its
            own statement (see `db.Database.reads`).
    """
    value = str(ef_search)
    connection = await session.connection()
    started_with = connection.info.get("server_settings", {})
    if started_with.get("hnsw.ef_search") == value:
        return  # one round trip saved
    if _autocommit(connection):
        raise RuntimeError("the HNSW scan needs hnsw.ef_search set in a transaction")
    await session.execute(select(func.set_config("hnsw.ef_search", value, True)))


async def _exact_nearest_rows(
    session: AsyncSession, cell: Scope, query_vector: np.ndarray, limit: int
) -> list[Any]:
    """The `limit` nearest active rows of one cell by an exact scan (its HNSW scan came
    back short), with their distance.
    """
    exact = memory_search.exact_nearest(
        memory_rows.active_cell(cell), memory_rows.query_vector_param(query_vector), limit
    ).subquery()
    statement = select(*memory_rows.RECORD_COLUMNS, exact.c.distance).join_from(
        exact, memory_rows.TABLE, memory_rows.TABLE.c.seq == exact.c.seq
    )
    return list((await session.execute(statement)).all())


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
    params = _statement_params(
        query_vector, text if with_text else "", limit, indexed, ann, rest, scope
    )
    if ann:
        await _set_ef_search(session, hnsw_ef_search(indexed.ef_search, limit))
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
            by_branch[branch] = await _exact_nearest_rows(session, cell, query_vector, limit)
    nearest = sorted(
        (row for part in by_branch.values() for row in part),
        key=lambda row: (row.distance, row.seq),
    )[:limit]
    query_terms = max((int(getattr(row, "query_terms", 0) or 0) for row in rows), default=0)
    query_idf = max((float(getattr(row, "query_idf", 0) or 0) for row in rows), default=0.0)
    keyword_rows.sort(key=lambda row: (-row.rank, row.seq))
    keyword_rows = keyword_rows[:limit]
    # a memory in both lists becomes one record
    records = {
        row.seq: memory_rows.record_from_row(row) for row in itertools.chain(nearest, keyword_rows)
    }
    return CandidateSets(
        semantic=[
            memory_rows.to_candidate(
                row,
                row.distance,
                text_rank=_rank(row),
                memory=records[row.seq],
                text_terms=_matched(row),
                text_idf=_matched_idf(row),
            )
            for row in nearest
        ],
        keyword=[
            memory_rows.to_candidate(
                row,
                row.distance,
                text_rank=float(row.rank),
                memory=records[row.seq],
                text_terms=_matched(row),
                text_idf=_matched_idf(row),
            )
            for row in keyword_rows
        ],
        exact_fallbacks=fallbacks,
        query_terms=query_terms,
        query_idf=query_idf,
    )


def _rank(row: Any) -> float | None:
    """The row's BM25 score when the statement computed one (it matched a word)."""
    rank = getattr(row, "rank", None)
    return None if rank is None else float(rank)


def _matched(row: Any) -> int | None:
    """How many of the query's lexemes the row holds, when it matched a word."""
    matched = getattr(row, "matched", None)
    return None if matched is None else int(matched)


def _matched_idf(row: Any) -> float | None:
    """Σ idf of the query's lexemes the row holds, when it matched a word."""
    value = getattr(row, "matched_idf", None)
    return None if value is None else float(value)


@dataclass(frozen=True, slots=True)
class _Shape:
    """What decides the text of the candidates statement (its values are parameters)."""

    exact_nearest: bool  #: some cells are searched by the exact vector scan
    ann_cells: int  #: cells searched through their HNSW index
    text_cells: int  #: cells whose postings are read (0: the query has no text to match)
    dimension: int  #: dimension the HNSW indexes cast to (0 without them)


def _cell_tuples(cells: Sequence[Scope]) -> list[tuple[str, str, str]]:
    return [(c.owner_kind.value, c.owner_id, c.bank.value) for c in cells]


def _cells_param(name: str) -> ColumnElement[bool]:
    cells = tuple_(
        memory_rows.TABLE.c.owner_kind, memory_rows.TABLE.c.owner_id, memory_rows.TABLE.c.bank
    )
    return and_(
        cells.in_(bindparam(name, expanding=True)),
        memory_rows.TABLE.c.status == Status.ACTIVE.value,
    )


@functools.lru_cache(maxsize=128)
def _candidates_statement(shape: _Shape) -> Select[Any]:
    """The candidates statement of one shape, built once (building one costs about 2 ms).

    Parameters: query_vector, limit, model, nearest_cells (a list of (owner_kind, owner_id,
    bank)), fts_text, and ann<i>_/txt<i>_ kind, owner and bank.
    """
    vector = memory_rows.query_vector_param()
    limit = bindparam("limit", type_=Integer)
    branch: Label[int] = literal_column("0").label("branch")
    nearest_parts: list[Select[Any]] = []
    if shape.exact_nearest:
        exact = memory_search.exact_nearest(_cells_param("nearest_cells"), vector, limit).subquery()
        nearest_parts.append(select(exact.c.seq, exact.c.distance, branch))
    if shape.ann_cells:
        typed = Vector(shape.dimension)
        # exactly the index's expression, and nothing else in ORDER BY, or the index is unused
        distance = cast(memory_rows.TABLE.c.embedding, typed).cosine_distance(cast(vector, typed))
        for i in range(shape.ann_cells):
            nearest_parts.append(
                select(
                    memory_rows.TABLE.c.seq,
                    distance.label("distance"),
                    literal_column(str(i + 1)).label("branch"),
                )
                .where(
                    memory_rows.cell_param(f"ann{i}"),
                    memory_rows.TABLE.c.embedding_model == bindparam("model"),
                )
                .order_by(distance)
                .limit(limit)
            )
    nearest = memory_rows.union_parts(nearest_parts).cte("nearest")
    columns: list[Any] = [
        *memory_rows.RECORD_COLUMNS,
        memory_rows.TABLE.c.embedding.cosine_distance(vector).label("distance"),
        nearest.c.branch,
    ]
    if not shape.text_cells:
        found = select(nearest.c.seq).subquery("found")
        return (
            select(*columns)
            .select_from(found)
            .join(memory_rows.TABLE, memory_rows.TABLE.c.seq == found.c.seq)
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
    bm25, query_idf = _bm25(terms, shape.text_cells)
    scored = bm25.cte("scored")
    # one row per memory from both lists by a grouping, not by joins: the planner cannot
    # size CTEs and nested-looped them (28k comparisons at 400 matches). A nearest row that
    # matches words but is not among the best `limit` keeps its BM25 score too (the fusion
    # normalises over every candidate); `keyword_hit` marks the best `limit` matches.
    # the best `limit` by a top-N sort, and the nearest rows' own scores by a semi-join: the
    # grouping below then sees about 2 × `limit` rows, not every match
    best = (
        select(
            scored.c.seq,
            scored.c.rank,
            scored.c.matched,
            scored.c.matched_idf,
            true().label("top"),
        )
        .order_by(scored.c.rank.desc(), scored.c.seq)
        .limit(limit)
        .subquery("best")
    )
    both = union_all(
        select(
            nearest.c.seq,
            nearest.c.branch,
            cast(null(), Float).label("rank"),
            cast(null(), Integer).label("matched"),
            cast(null(), Float).label("matched_idf"),
            false().label("top"),
        ),
        select(
            best.c.seq,
            cast(null(), Integer),
            best.c.rank,
            best.c.matched,
            best.c.matched_idf,
            best.c.top,
        ),
        select(
            scored.c.seq,
            cast(null(), Integer),
            scored.c.rank,
            scored.c.matched,
            scored.c.matched_idf,
            false(),
        ).where(scored.c.seq.in_(select(nearest.c.seq))),
    ).subquery("both")
    found = (
        select(
            both.c.seq,
            func.max(both.c.branch).label("branch"),
            func.max(both.c.rank).label("rank"),
            func.max(both.c.matched).label("matched"),
            func.max(both.c.matched_idf).label("matched_idf"),
            func.bool_or(both.c.top).label("keyword_hit"),
        )
        .group_by(both.c.seq)
        .having(or_(func.max(both.c.branch).is_not(None), func.bool_or(both.c.top)))
        .subquery("found")
    )
    return (
        select(
            *memory_rows.RECORD_COLUMNS,
            memory_rows.TABLE.c.embedding.cosine_distance(vector).label("distance"),
            found.c.branch,
            found.c.rank,
            found.c.matched,
            found.c.matched_idf,
            found.c.keyword_hit,
            select(func.cardinality(tsquery.c.terms)).scalar_subquery().label("query_terms"),
            query_idf.label("query_idf"),
        )
        .select_from(found)
        .join(memory_rows.TABLE, memory_rows.TABLE.c.seq == found.c.seq)
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


def _bm25(terms: Any, cells: int) -> tuple[Select[Any], ColumnElement[float]]:
    """(seq, rank, matched, matched_idf): Okapi BM25 of each memory of cells
    txt0…txt<cells−1> holding a query lexeme (Robertson and Zaragoza 2009), and the query's
    Σ idf.

    rank = Σ_t idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·dl / avgdl)) over the query's
    lexemes t in the memory, idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5)), from the postings
    and bank statistics the triggers of migration 0014 keep (`memory_postings`,
    `memory_term_cells`): N = the scope's active memories, df = those holding t, tf = t's
    positions in the memory's tsvector ('english' || 'simple', so a word whose stem is
    itself counts twice), dl = the memory's distinct lexemes, avgdl = their mean over the
    matched memories (as before the postings: the ranking is unchanged). Each cell's
    postings of the query's lexemes are one index-only range scan per lexeme: the cost
    follows the matches, not the bank's size. `matched_idf` is Σ idf(t) over the lexemes the
    memory holds; the second value is the query's Σ idf(t), a lexeme no memory of the scope
    holds counted at df = 0 (the keyword evidence of `core.ranking.keyword_evidence`).
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
    postings = memory_rows.union_parts(parts).cte("postings")
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
    # `matched`: the query's lexemes the memory holds (one posting per memory and lexeme)
    absent = func.greatest(
        func.cardinality(lexemes) - select(func.count()).select_from(idfs).scalar_subquery(), 0
    )
    query_idf = select(func.coalesce(func.sum(idfs.c.idf), 0.0)).scalar_subquery() + cast(
        absent, Float
    ) * func.ln(1.0 + (func.coalesce(n, 0.0) + 0.5) / 0.5)
    statement = select(
        hits.c.seq,
        func.sum(weight).label("rank"),
        cast(func.count(), Integer).label("matched"),
        func.sum(idf).label("matched_idf"),
    ).group_by(hits.c.seq)
    return statement, query_idf


def _cell_keys(columns: Any, prefix: str) -> list[ColumnElement[bool]]:
    return [
        columns.owner_kind == bindparam(f"{prefix}_kind"),
        columns.owner_id == bindparam(f"{prefix}_owner"),
        columns.bank == bindparam(f"{prefix}_bank"),
    ]
