"""The read path's candidates: a bank's own indexes where it has them, exact scans elsewhere."""

from __future__ import annotations

import numpy as np

from service import observability
from service.core.records import ReadScope
from service.flows.runtime import Runtime
from service.storage import hybrid_search


async def gather(
    rt: Runtime,
    *,
    scope: ReadScope,
    query: str,
    query_vector: np.ndarray,
    limit: int,
) -> hybrid_search.CandidateSets:
    """Vector and full-text candidates of one query within `scope`, in one transaction.

    Banks with their own indexes (`flows.owner_indexes`) are searched through them —
    HNSW with `hnsw.ef_search` = max(MEMORY_ANN_EF_SEARCH, 2 × `limit`), so approximate —
    and every other bank exactly (`storage.hybrid_search.candidates`).

    Args:
        query: the message (full-text search).
        query_vector: (dimension,) float32 embedding of `query` by the loaded model.
        limit: candidates per list.
    """
    # with the pool's connections already at the HNSW scans' ef_search (bootstrap), the one
    # read needs no transaction: autocommit saves the BEGIN and COMMIT round trips
    ef_search = str(hybrid_search.hnsw_ef_search(rt.settings.ann_ef_search, limit))
    preset = rt.db.server_settings.get("hnsw.ef_search") == ef_search
    async with rt.db.reads() if preset else rt.db.unit_of_work() as session:
        indexed = await rt.owner_indexes.cells(
            session,
            scope,
            model=rt.encoder.model_name,
            dimension=rt.encoder.dimension,
            ef_search=rt.settings.ann_ef_search,
        )
        found = await hybrid_search.candidates(
            session,
            scope=scope,
            query_vector=query_vector,
            text=query,
            limit=limit,
            indexed=indexed,
        )
    observability.record_ann_fallbacks(found.exact_fallbacks)
    return found
