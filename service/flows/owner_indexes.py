"""Banks with many memories get their own HNSW and full-text indexes, in the background.

A bank of one owner (a cell: owner kind, owner id, bank) with at least
MEMORY_ANN_MIN_MEMORIES active memories gets a partial HNSW index on its vectors and a
partial GIN index on its full text (`storage.owner_indexes`); the read path then searches it
through them instead of scanning all its rows. Below that size an exact scan costs a few
milliseconds (about 1 µs a row) and stays exact, so small banks keep it.

`refresh` makes the catalog match the data, one run at a time across every process (a
PostgreSQL advisory lock):

1. cells with at least the threshold get both indexes; a cell keeps them until it falls
   below half the threshold, so a bank around the threshold is not rebuilt again and again;
2. indexes of other cells, of another embedding model or dimension, and indexes left
   invalid by a failed build are dropped;
3. missing ones are built with CREATE INDEX CONCURRENTLY (writes go on meanwhile), largest
   cell first, and the table is analysed afterwards.

Each run first folds the full-text statistics' rows (`storage.term_stats.fold`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from service.core.records import Scope
from service.flows.runtime import Runtime
from service.storage import owner_indexes, term_stats

log = logging.getLogger(__name__)

__all__ = ["LOCK_KEY", "RefreshResult", "refresh"]

LOCK_KEY = 0x6D656D6F72790001
"""pg_advisory_lock key of the refresh ("memory" in ASCII, then 1): one run at a time."""


@dataclass(frozen=True, slots=True)
class RefreshResult:
    """What one refresh did."""

    built: tuple[str, ...] = ()  #: indexes created
    dropped: tuple[str, ...] = ()  #: indexes removed
    failed: tuple[str, ...] = ()  #: builds that failed (retried at the next run)
    busy: bool = False  #: another process was refreshing; nothing done


async def refresh(rt: Runtime) -> RefreshResult:
    """Build the indexes heavy cells need and drop the ones no cell needs any more.

    Returns:
        What changed. A failed build is logged, its invalid index dropped, and the next run
        tries again; it never raises for one cell.

    Raises:
        psycopg.OperationalError: PostgreSQL is not reachable.
    """
    # the full-text statistics' insert-only rows, one per bank again (storage/term_stats.py)
    async with rt.db.unit_of_work() as session:
        await term_stats.fold(session)
    threshold = rt.settings.ann_min_memories
    model, dimension = rt.encoder.model_name, rt.encoder.dimension
    built: list[str] = []
    dropped: list[str] = []
    failed: list[str] = []
    # a session advisory lock and CREATE INDEX CONCURRENTLY: a direct connection, not a pooler
    async with owner_indexes.maintenance(rt.db, lock_key=LOCK_KEY, url=rt.direct_url) as conn:
        if conn is None:
            return RefreshResult(busy=True)
        existing = await owner_indexes.existing_indexes(conn)
        counts = (
            await owner_indexes.cell_counts(conn, min_rows=max(threshold // 2, 1))
            if threshold > 0
            else {}
        )
        wanted: dict[str, tuple[str, Scope]] = {}
        for cell, rows in sorted(counts.items(), key=lambda item: -item[1]):
            names = {
                owner_indexes.ann_index_name(cell, model=model, dimension=dimension): "ann",
                owner_indexes.fts_index_name(cell): "fts",
            }
            if rows >= threshold or any(existing.get(name) for name in names):
                wanted.update({name: (kind, cell) for name, kind in names.items()})
        for name, valid in existing.items():
            if name not in wanted or not valid:
                await owner_indexes.drop_index(conn, name)
                dropped.append(name)
        for name, (kind, cell) in wanted.items():
            if existing.get(name):
                continue
            try:
                await owner_indexes.build_index(
                    conn, cell, kind=kind, model=model, dimension=dimension
                )
                built.append(name)
            except owner_indexes.BuildFailed as exc:
                log.warning("could not build index %s: %s", name, exc)
                await owner_indexes.drop_index(conn, name)
                failed.append(name)
        if built:
            # fresh statistics, or a planner that still sees a small table may keep
            # sorting the bank's rows instead of scanning its new index
            await owner_indexes.analyze(conn)
    if built or dropped:
        rt.owner_indexes.forget()
        log.info("per-owner indexes: %d built, %d dropped", len(built), len(dropped))
    return RefreshResult(tuple(built), tuple(dropped), tuple(failed))
