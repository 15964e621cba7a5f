"""The optional LLM relevance tier for the 0.7–0.93 band, cached (DESIGN §6.2, §7)."""

from __future__ import annotations

import logging

from service.core import ranking
from service.core.ranking import Fused, RankingParams
from service.flows.runtime import Runtime

log = logging.getLogger(__name__)


async def apply_llm_tier(
    rt: Runtime, *, query: str, items: list[Fused], params: RankingParams
) -> list[Fused]:
    """Drop middle-band items the LLM judges irrelevant; others pass unchanged.

    Off unless MEMORY_LLM_RELEVANCE is set and an LLM is configured. Any LLM trouble keeps
    the items (the bands alone decide), so this tier can only remove noise, never fail a turn.
    """
    if not rt.settings.llm_relevance or not rt.llm.configured:
        return items
    middle = [f for f in items if ranking.needs_llm_score(f, params=params)]
    if not middle:
        return items
    try:
        scores = await rt.relevance_cache.scores(
            rt.llm, query=query, memories=[f.candidate.memory for f in middle]
        )
    except Exception as exc:
        log.warning("LLM relevance tier skipped: %s", exc)
        return items
    return [f for f in items if f not in middle or scores.get(f.candidate.memory.id, 1.0) >= 0.5]
