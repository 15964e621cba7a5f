"""The full-text postings and bank statistics that Okapi BM25 reads (migration 0014).

The triggers of migration 0014 keep `memory_term_cells` and `memory_postings` equal to what
`expected_cells` / `expected_postings` compute from the active memories, in the writer's own
transaction (`memory_term_cells` as sums of insert-only rows, which `fold` compacts).
`rebuild` recomputes them from scratch: after a bulk load made with triggers off
(`session_replication_role = replica`), or to repair them.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = [
    "REBUILD_SQL",
    "expected_cells",
    "expected_postings",
    "fold",
    "rebuild",
    "stored_cells",
    "stored_postings",
]

_EXPECTED_CELLS = """SELECT owner_kind, owner_id, bank, count(*) AS docs,
       sum(coalesce(length(tsv), 0)) AS lexemes
FROM memories WHERE status = 'active' GROUP BY owner_kind, owner_id, bank"""

# tf and dl are smallint: a memory's text is short (an extraction writes a sentence), and
# one longer than 32,767 distinct words is counted as that long
_EXPECTED_POSTINGS = """SELECT m.owner_kind, m.owner_id, m.bank, l.lexeme, m.seq,
       least(coalesce(array_length(l.positions, 1), 1), 32767) AS tf,
       least(length(m.tsv), 32767) AS dl
FROM memories m, unnest(m.tsv) AS l WHERE m.status = 'active'"""

Cell = tuple[str, str, str, int, int]
Posting = tuple[str, str, str, str, int, int, int]


REBUILD_SQL: tuple[str, ...] = (
    "LOCK TABLE memories IN SHARE MODE",  # writers wait until the rebuild commits
    "DELETE FROM memory_postings",
    "DELETE FROM memory_term_cells",
    "INSERT INTO memory_term_cells (owner_kind, owner_id, bank, docs, lexemes) " + _EXPECTED_CELLS,
    "INSERT INTO memory_postings (owner_kind, owner_id, bank, lexeme, seq, tf, dl) "
    + _EXPECTED_POSTINGS,
)
"""The statements of `rebuild`, in order, for one transaction (a bulk loader may run them
through its own connection)."""


async def rebuild(session: AsyncSession) -> tuple[int, int]:
    """Recompute both tables from the memories, in the session's transaction (writers of
    memories wait meanwhile).

    Returns:
        (cells, postings) written.
    """
    counts = [(await session.execute(text(sql))).rowcount for sql in REBUILD_SQL]  # type: ignore[attr-defined]
    return int(counts[3]), int(counts[4])


_FOLD = """WITH gone AS (
  DELETE FROM memory_term_cells WHERE (owner_kind, owner_id, bank) IN (
    SELECT owner_kind, owner_id, bank FROM memory_term_cells
    GROUP BY owner_kind, owner_id, bank HAVING count(*) > 1)
  RETURNING owner_kind, owner_id, bank, docs, lexemes)
INSERT INTO memory_term_cells (owner_kind, owner_id, bank, docs, lexemes)
SELECT owner_kind, owner_id, bank, sum(docs), sum(lexemes) FROM gone
GROUP BY owner_kind, owner_id, bank HAVING sum(docs) <> 0 OR sum(lexemes) <> 0"""


async def fold(session: AsyncSession) -> int:
    """Sum each bank's rows of `memory_term_cells` into one (a bank at 0 keeps none).

    Safe beside writers and another fold: the DELETE takes only rows its snapshot sees, and
    a row deleted by a concurrent fold is skipped, not counted twice.

    Returns:
        Banks whose rows were summed (each had more than one).
    """
    result = await session.execute(text(_FOLD))
    return int(result.rowcount)  # type: ignore[attr-defined]


async def stored_cells(session: AsyncSession) -> list[Cell]:
    """Each bank's figures (the sums of its rows in `memory_term_cells`; banks at 0 left
    out), sorted.
    """
    rows = await session.execute(
        text(
            "SELECT owner_kind, owner_id, bank, sum(docs), sum(lexemes) FROM memory_term_cells "
            "GROUP BY 1, 2, 3 HAVING sum(docs) <> 0 OR sum(lexemes) <> 0 ORDER BY 1, 2, 3"
        )
    )
    return [tuple(row) for row in rows.all()]


async def expected_cells(session: AsyncSession) -> list[Cell]:
    """What `memory_term_cells` should hold, computed from the memories, sorted."""
    rows = await session.execute(text(_EXPECTED_CELLS + " ORDER BY 1, 2, 3"))
    return [tuple(row) for row in rows.all()]


async def stored_postings(session: AsyncSession) -> list[Posting]:
    """Every row of `memory_postings`, sorted."""
    rows = await session.execute(
        text(
            "SELECT owner_kind, owner_id, bank, lexeme, seq, tf, dl FROM memory_postings "
            "ORDER BY 1, 2, 3, 4, 5"
        )
    )
    return [tuple(row) for row in rows.all()]


async def expected_postings(session: AsyncSession) -> list[Posting]:
    """What `memory_postings` should hold, computed from the memories, sorted."""
    rows = await session.execute(text(_EXPECTED_POSTINGS + " ORDER BY 1, 2, 3, 4, 5"))
    return [tuple(row) for row in rows.all()]
