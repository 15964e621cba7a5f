"""Long candidates rescored by their best sentence before fusion (core/passages.py)."""

from __future__ import annotations

import dataclasses

import numpy as np

from service.core import passages
from service.core.records import Candidate
from service.flows.runtime import Runtime
from service.storage.hybrid_search import CandidateSets


async def rescore(
    rt: Runtime, found: CandidateSets, query_vector: np.ndarray, *, min_chars: int
) -> CandidateSets:
    """`found` with each candidate longer than `min_chars` scored by max(itself, its best
    sentence); the vector list re-sorted nearest first (ties: earlier stored).

    Sentences are embedded on the query lane through the encoder's cache.

    Args:
        query_vector: (dimension,) float32, L2-normalized.
    """
    long = {
        c.memory.seq: c
        for c in (*found.semantic, *found.keyword)
        if passages.is_long(c, min_chars=min_chars)
    }
    split = {seq: passages.sentences(c.memory.content) for seq, c in long.items()}
    texts = [s for parts in split.values() for s in parts]
    if not texts:
        return found
    vectors = await rt.encoder.encode(texts)
    cosines = vectors @ np.asarray(query_vector, dtype=np.float32)
    better: dict[int, Candidate] = {}
    start = 0
    for seq, parts in split.items():
        better[seq] = passages.best_of(long[seq], cosines[start : start + len(parts)].tolist())
        start += len(parts)

    def swap(cands: list[Candidate]) -> list[Candidate]:
        return [better.get(c.memory.seq, c) for c in cands]

    semantic = sorted(swap(found.semantic), key=lambda c: (-c.cosine, c.memory.seq))
    return dataclasses.replace(found, semantic=semantic, keyword=swap(found.keyword))
