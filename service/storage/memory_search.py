"""Searches over one scope's memories: exact nearest vectors, full-text words and phrases,
and the pairwise similarities MMR needs.

Every search takes a required `scope`, inside the SQL statement (DESIGN §3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    Text,
    TextClause,
    bindparam,
    func,
    literal_column,
    select,
)
from sqlalchemy import text as sa_text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from service.core.records import (
    Candidate,
    ReadScope,
    Status,
)
from service.storage import memory_rows
from service.storage.tables import MemoryRow


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
    return await _exact_candidates(
        session, memory_rows.active_in(scope), memory_rows.query_vector_param(query_vector), limit
    )


def exact_nearest(
    where: ColumnElement[bool], vector: BindParameter[Any], limit: Any
) -> Select[Any]:
    """(seq, distance) of the `limit` nearest rows matching `where`, by an exact scan.

    Only the sequence number and the distance go through the sort: carrying whole rows
    (a 384-d vector is 1.5 kB) through it cost about 40 % more at 10k rows.
    """
    inner = (
        select(
            memory_rows.TABLE.c.seq,
            memory_rows.TABLE.c.embedding.cosine_distance(vector).label("distance"),
        )
        .where(where, memory_rows.TABLE.c.embedding.is_not(None))
        .offset(0)
        .subquery()
    )
    return (
        select(inner.c.seq, inner.c.distance).order_by(inner.c.distance, inner.c.seq).limit(limit)
    )


async def _exact_candidates(
    session: AsyncSession, where: ColumnElement[bool], vector: BindParameter[Any], limit: int
) -> list[Candidate]:
    nearest = exact_nearest(where, vector, limit).subquery()
    stmt = (
        select(*memory_rows.RECORD_COLUMNS, nearest.c.distance)
        .join_from(nearest, memory_rows.TABLE, memory_rows.TABLE.c.seq == nearest.c.seq)
        .order_by(nearest.c.distance, nearest.c.seq)
    )
    return [
        memory_rows.to_candidate(row, row.distance) for row in (await session.execute(stmt)).all()
    ]


_OR_QUERY_SQL = """(SELECT
  to_tsquery('simple', replace(plainto_tsquery('english', :fts_text)::text, '&', '|'))
  || to_tsquery('simple', coalesce((
       SELECT string_agg(quote_literal(word), ' | ')
       FROM unnest(tsvector_to_array(to_tsvector('simple', :fts_text))) AS word
       WHERE ts_lexize('english_stem', word) <> '{}'::text[]), '')))"""


def or_query(text: str | None) -> TextClause:
    """A tsquery matching any word of `text`, English-stemmed or as written.

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
    best = _exact_keyword(memory_rows.active_in(scope), or_query(text), limit).subquery()
    columns: list[Any] = [*memory_rows.RECORD_COLUMNS, best.c.rank]
    if query_vector is not None:
        columns.append(
            memory_rows.TABLE.c.embedding.cosine_distance(
                memory_rows.query_vector_param(query_vector)
            ).label("distance")
        )
    stmt = (
        select(*columns)
        .join_from(best, memory_rows.TABLE, memory_rows.TABLE.c.seq == best.c.seq)
        .order_by(best.c.rank.desc(), best.c.seq)
    )
    return [
        memory_rows.to_candidate(
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
    owned = (
        select(memory_rows.TABLE.c.seq, memory_rows.TABLE.c.tsv).where(where).offset(0).subquery()
    )
    rank = func.ts_rank(owned.c.tsv, query).label("rank")
    return (
        select(owned.c.seq, rank)
        .where(owned.c.tsv.op("@@")(query))
        .order_by(rank.desc(), owned.c.seq)
        .limit(limit)
    )


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
            memory_rows.scope_filter(scope),
            MemoryRow.status == Status.ACTIVE.value,
            MemoryRow.tsv.op("@@")(query),
        )
        .order_by(rank.desc(), MemoryRow.seq)
        .limit(limit)
    )
    return [
        Candidate(memory=memory_rows.to_record(row), similarity=0.0, cosine=0.0, text_rank=float(r))
        for row, r in (await session.execute(stmt.options(defer(MemoryRow.embedding)))).all()
    ]


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
