"""Per-owner indexes for owners with many memories: names, DDL and what the catalog holds.

With pgvector 0.6 an HNSW index over every owner's rows cannot serve a per-owner query: the
owner filter is applied after the scan, which yields at most `hnsw.ef_search` rows, so a user
owning 1 % of the table gets back a handful of memories instead of 50, silently
(docs/discussions/retrieval.md). A *partial* index whose predicate is one cell — owner kind,
owner id, bank, active, and for vectors the embedding model — holds only that cell's rows, so
its scan returns min(ef_search, rows) of them, all of the right owner.

Each heavy cell gets two such indexes, made at run time by a background job
(`service.flows.owner_indexes`):

- an HNSW index on `embedding::vector(<dimension>)` with `vector_cosine_ops` (the column is
  untyped since migration 0006; an index needs a typed expression, and a query uses it only
  when it orders by the same expression);
- a GIN index on `tsv`, so a full-text query reads the matching rows of that cell only,
  instead of every row of the owner or the matches of every owner.

Names are deterministic hashes of the cell (and of the model and dimension for HNSW), so the
read path knows which index a cell would have without asking for its definition, and an
index of another model is simply not wanted any more.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import psycopg
from cachetools import TTLCache
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from service.core.records import Bank, ReadScope, Scope
from service.storage.db import Database, libpq_url

__all__ = [
    "ANN_PREFIX",
    "FTS_PREFIX",
    "HNSW_EF_CONSTRUCTION",
    "HNSW_M",
    "IndexRegistry",
    "IndexedCells",
    "ann_index_name",
    "cell_counts",
    "create_ann_index",
    "create_fts_index",
    "drop_index",
    "existing_indexes",
    "fts_index_name",
    "is_owner_index",
    "valid_index_names",
]

ANN_PREFIX = "memories_ann_"
"""Name prefix of the per-owner HNSW indexes."""
FTS_PREFIX = "memories_fts_"
"""Name prefix of the per-owner full-text (GIN) indexes."""
HNSW_M = 16
"""HNSW graph degree (pgvector's default; ../shared/notes/pgvector.md: recall 0.99–1.0)."""
HNSW_EF_CONSTRUCTION = 64
"""HNSW candidate list size while building (pgvector's default)."""
BUILD_MEMORY = "512MB"
"""maintenance_work_mem for a build: an HNSW graph of 100k 384-d vectors takes about 195 MB;
with PostgreSQL's default 64 MB the build spills and takes about 4× longer (pgvector notes)."""


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def ann_index_name(cell: Scope, *, model: str, dimension: int) -> str:
    """Name of the HNSW index of `cell` for vectors of `model` with `dimension` components."""
    return ANN_PREFIX + _digest(
        cell.owner_kind.value, cell.owner_id, cell.bank.value, model, str(dimension)
    )


def fts_index_name(cell: Scope) -> str:
    """Name of the full-text (GIN) index of `cell`."""
    return FTS_PREFIX + _digest(cell.owner_kind.value, cell.owner_id, cell.bank.value)


def is_owner_index(name: str) -> bool:
    """True for the name of a per-owner index made at run time (not by a migration)."""
    return name.startswith((ANN_PREFIX, FTS_PREFIX))


# -- catalog -------------------------------------------------------------------------------

_OWNER_INDEXES_SQL = r"""
SELECT c.relname, i.indisvalid AND i.indisready
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'memories'::regclass
  AND (c.relname LIKE 'memories\_ann\_%' OR c.relname LIKE 'memories\_fts\_%')"""


async def valid_index_names(session: AsyncSession) -> frozenset[str]:
    """Names of the per-owner indexes the planner may use now (built and valid).

    An index still being built concurrently, or left invalid by a failed build, is not
    listed: the planner ignores it too.
    """
    rows = (await session.execute(text(_OWNER_INDEXES_SQL))).all()
    return frozenset(name for name, usable in rows if usable)


async def existing_indexes(conn: psycopg.AsyncConnection) -> dict[str, bool]:
    """Every per-owner index in the catalog → whether it is valid (False: being built or
    left behind by a failed build).
    """
    rows = await (await conn.execute(_OWNER_INDEXES_SQL)).fetchall()
    return {str(name): bool(usable) for name, usable in rows}


async def cell_counts(conn: psycopg.AsyncConnection, *, min_rows: int) -> dict[Scope, int]:
    """Active memories per cell, for the cells with at least `min_rows` of them.

    Grouped by (owner_id, bank) only, which ix_memories_owner_bank_core answers without
    reading the table; a bank belongs to one kind of owner (`Bank.owner_kind`).
    """
    cursor = await conn.execute(
        "SELECT owner_id, bank, count(*) FROM memories WHERE status = 'active' "
        "GROUP BY owner_id, bank HAVING count(*) >= %s",
        (max(min_rows, 1),),
    )
    counts: dict[Scope, int] = {}
    for owner, value, n in await cursor.fetchall():
        try:
            bank = Bank(value)
        except ValueError:  # a value no release wrote; such rows are never read either
            continue
        counts[Scope(bank.owner_kind, str(owner), bank)] = int(n)
    return counts


# -- DDL (autocommit connection: CREATE/DROP INDEX CONCURRENTLY cannot run in a transaction) --


def _cell_predicate(cell: Scope) -> sql.Composed:
    return sql.SQL(
        "owner_kind = {kind} AND owner_id = {owner} AND bank = {bank} AND status = 'active'"
    ).format(
        kind=sql.Literal(cell.owner_kind.value),
        owner=sql.Literal(cell.owner_id),
        bank=sql.Literal(cell.bank.value),
    )


class BuildFailed(Exception):
    """A CREATE INDEX of one cell failed (not a lost connection); its invalid index may be
    left behind (`drop_index` it).
    """


@contextlib.asynccontextmanager
async def maintenance(
    db: Database, *, lock_key: int, url: str | None = None
) -> AsyncIterator[psycopg.AsyncConnection | None]:
    """An autocommit connection to `db`'s database holding the advisory lock `lock_key`, or
    None when another process holds it. Autocommit: CREATE INDEX CONCURRENTLY cannot run in
    a transaction, so this is not a pooled session.

    Args:
        url: a direct (not pooled) libpq URL of the same database; None = `db`'s own.

    Raises:
        psycopg.OperationalError: PostgreSQL is not reachable.
    """
    url = url or libpq_url(db.engine.url.render_as_string(hide_password=False))
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        locked = await (
            await conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key,))
        ).fetchone()
        if not locked or not locked[0]:
            yield None
            return
        try:
            yield conn
        finally:
            if not conn.closed:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key,))


async def build_index(
    conn: psycopg.AsyncConnection, cell: Scope, *, kind: str, model: str, dimension: int
) -> str:
    """`create_ann_index` (kind "ann") or `create_fts_index` (kind "fts"); returns the name.

    Raises:
        BuildFailed: the build failed; the connection is still usable.
        psycopg.OperationalError: PostgreSQL is not reachable.
    """
    try:
        if kind == "ann":
            return await create_ann_index(conn, cell, model=model, dimension=dimension)
        return await create_fts_index(conn, cell)
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:
        raise BuildFailed(str(exc)) from exc


async def analyze(conn: psycopg.AsyncConnection) -> None:
    """Fresh planner statistics for the memories table."""
    await conn.execute("ANALYZE memories")


async def create_ann_index(
    conn: psycopg.AsyncConnection, cell: Scope, *, model: str, dimension: int
) -> str:
    """Build the HNSW index of `cell` without blocking writes; returns its name.

    Only vectors of `model` are indexed; rows without a vector are left out by pgvector.

    Raises:
        psycopg.Error: the build failed (an invalid index may be left; `drop_index` it).
    """
    name = ann_index_name(cell, model=model, dimension=dimension)
    await conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(BUILD_MEMORY)))
    await conn.execute(
        sql.SQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memories USING hnsw "
            "((embedding::vector({dimension})) vector_cosine_ops) "
            "WITH (m = {m}, ef_construction = {ef}) WHERE {cell} AND embedding_model = {model}"
        ).format(
            name=sql.Identifier(name),
            dimension=sql.Literal(int(dimension)),
            m=sql.Literal(HNSW_M),
            ef=sql.Literal(HNSW_EF_CONSTRUCTION),
            cell=_cell_predicate(cell),
            model=sql.Literal(model),
        )
    )
    return name


async def create_fts_index(conn: psycopg.AsyncConnection, cell: Scope) -> str:
    """Build the full-text (GIN) index of `cell` without blocking writes; returns its name.

    Raises:
        psycopg.Error: the build failed (an invalid index may be left; `drop_index` it).
    """
    name = fts_index_name(cell)
    await conn.execute(
        sql.SQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memories USING gin (tsv) "
            "WHERE {cell}"
        ).format(name=sql.Identifier(name), cell=_cell_predicate(cell))
    )
    return name


async def drop_index(conn: psycopg.AsyncConnection, name: str) -> None:
    """Drop a per-owner index without blocking reads or writes.

    Raises:
        ValueError: `name` is not a per-owner index (migrations own every other index).
    """
    if not is_owner_index(name):
        raise ValueError(f"{name!r} is not a per-owner index")
    await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))


# -- the read path's view ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexedCells:
    """The cells of one read scope that have usable per-owner indexes."""

    ann: frozenset[Scope] = frozenset()  #: cells with an HNSW index for `model`, `dimension`
    fts: frozenset[Scope] = frozenset()  #: cells with a full-text (GIN) index
    model: str = ""  #: embedding model of the indexed vectors
    dimension: int = 0  #: their dimension (the index casts to vector(dimension))
    ef_search: int = 0  #: hnsw.ef_search for the scans (≥ 2 × the limit asked)


class IndexRegistry:
    """Which per-owner indexes are usable, read from the catalog at most every `ttl_s`.

    A stale answer costs time, never correctness: a query shaped for a missing index is
    planned without it and stays exact, and an index not yet known is simply not used.

    Args:
        ttl_s: seconds a catalog read is reused (a new index is used at most this late).
    """

    def __init__(self, ttl_s: float = 30.0) -> None:
        self._names: TTLCache[str, frozenset[str]] = TTLCache(maxsize=1, ttl=ttl_s)

    async def names(self, session: AsyncSession) -> frozenset[str]:
        """Valid per-owner index names (cached)."""
        found = self._names.get("names")
        if found is None:
            found = await valid_index_names(session)
            self._names["names"] = found
        return found

    async def cells(
        self, session: AsyncSession, scope: ReadScope, *, model: str, dimension: int, ef_search: int
    ) -> IndexedCells:
        """The cells of `scope` with usable indexes for vectors of `model` and `dimension`."""
        names = await self.names(session)
        if not names:
            return IndexedCells()
        return IndexedCells(
            ann=frozenset(
                c
                for c in scope.scopes
                if ann_index_name(c, model=model, dimension=dimension) in names
            ),
            fts=frozenset(c for c in scope.scopes if fts_index_name(c) in names),
            model=model,
            dimension=dimension,
            ef_search=ef_search,
        )

    def forget(self) -> None:
        """Read the catalog again at the next query (after this process changed it)."""
        self._names.clear()
