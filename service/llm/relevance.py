"""LLM relevance scores for (query, memory) pairs, with a versioned LRU cache (DESIGN §7)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence

from cachetools import LRUCache

from service.core.records import Memory
from service.llm.client import LLMClient, decode_json_answer

PROMPT = """Rate how useful each remembered note is for answering the user's message.
Answer one JSON object mapping each note id to a number from 0 (useless) to 1 (needed), e.g.
{"n1": 0.9, "n2": 0.1}. Nothing else."""


def _query_key(query: str) -> str:
    return hashlib.sha256(" ".join(query.split()).casefold().encode()).hexdigest()[:24]


class RelevanceCache:
    """Scores by (query, memory id, memory version); a changed memory can never hit.

    Sizes from DESIGN §7: 10,000 scores, and a reverse index of 5,000 memories → their keys
    so forgetting a memory drops its scores at once.
    """

    def __init__(self, *, size: int = 10_000, index_size: int = 5_000) -> None:
        self._scores: LRUCache[tuple[str, uuid.UUID, int], float] = LRUCache(maxsize=size)
        self._by_memory: LRUCache[uuid.UUID, set[tuple[str, uuid.UUID, int]]] = LRUCache(
            maxsize=index_size
        )
        self.hits = 0
        self.misses = 0

    async def scores(
        self, llm: LLMClient, *, query: str, memories: Sequence[Memory]
    ) -> dict[uuid.UUID, float]:
        """Score of each memory for `query` in [0, 1]; one LLM call for the uncached ones.

        Raises:
            LLMUnavailable, ExtractionOutputInvalid: the LLM failed (nothing is cached).
        """
        qkey = _query_key(query)
        found: dict[uuid.UUID, float] = {}
        missing: list[Memory] = []
        for memory in memories:
            key = (qkey, memory.id, memory.version)
            if key in self._scores:
                found[memory.id] = self._scores[key]
                self.hits += 1
            else:
                missing.append(memory)
                self.misses += 1
        if missing:
            notes = "\n".join(f"[n{i + 1}] {m.content}" for i, m in enumerate(missing))
            answer = await llm.complete(
                [
                    {"role": "system", "content": PROMPT},
                    {"role": "user", "content": f"Message: {query}\n\nNotes:\n{notes}"},
                ],
                json_answer=True,
                max_tokens=300,
            )
            data = decode_json_answer(answer)
            data = data if isinstance(data, dict) else {}
            for i, memory in enumerate(missing):
                try:
                    score = min(max(float(data.get(f"n{i + 1}", 1.0)), 0.0), 1.0)
                except (TypeError, ValueError):
                    score = 1.0
                found[memory.id] = score
                key = (qkey, memory.id, memory.version)
                self._scores[key] = score
                self._by_memory.setdefault(memory.id, set()).add(key)
        return found

    def known(self, *, query: str, memories: Sequence[Memory]) -> dict[uuid.UUID, float] | None:
        """Cached score of each memory for `query`, or None when any is not cached (no LLM call).

        Counted as hits only when every score is known.
        """
        qkey = _query_key(query)
        keys = {m.id: (qkey, m.id, m.version) for m in memories}
        if any(key not in self._scores for key in keys.values()):
            return None
        self.hits += len(keys)
        return {memory_id: self._scores[key] for memory_id, key in keys.items()}

    def forget(self, memory_id: uuid.UUID) -> None:
        """Drop every cached score of a memory."""
        for key in self._by_memory.pop(memory_id, set()):
            self._scores.pop(key, None)
