"""The optional LLM relevance tier for the 0.7–0.93 band, cached (DESIGN §6.2, §7).

The judge runs inside the inlet's deadline (`MEMORY_CONTEXT_DEADLINE_S`), so it may take only
part of it: a local model on CPU answers in 3–190 s (bench/results/rerank_llm.md), and a
judge that ran into the deadline used to cost the turn every memory, again on the next turn,
since the cancelled call cached nothing. Past its share the bands alone decide this turn and
the call goes on in the background, so its scores are cached for the next turn with the same
message; at most `MAX_LATE_JUDGES` such calls are left running.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from service.core import ranking
from service.core.ranking import Fused, RankingParams
from service.flows.runtime import Runtime

log = logging.getLogger(__name__)

#: Share of the inlet's deadline the judge may wait for: the ranking after it (recency, MMR's
#: similarity statement) and the rendering need the rest; a warm context call takes 50–160 ms
#: of the default 0.5 s (docs/performance.md, latency at scale).
JUDGE_SHARE = 0.5

#: Judge calls left running past their wait, at most: each holds an LLM slot the extraction
#: needs too, and a slow model would otherwise get one more call per turn.
MAX_LATE_JUDGES = 2

_late: set[asyncio.Future[dict[uuid.UUID, float]]] = set()


def _finished_late(judge: asyncio.Future[dict[uuid.UUID, float]]) -> None:
    _late.discard(judge)
    if not judge.cancelled() and judge.exception() is not None:
        log.warning("LLM relevance judge failed after its turn: %s", judge.exception())


def _leave_running(judge: asyncio.Future[dict[uuid.UUID, float]]) -> None:
    _late.add(judge)
    judge.add_done_callback(_finished_late)


async def apply_llm_tier(
    rt: Runtime, *, query: str, items: list[Fused], params: RankingParams
) -> list[Fused]:
    """Drop middle-band items the LLM judges irrelevant; others pass unchanged.

    Off unless MEMORY_LLM_RELEVANCE is set and an LLM is configured. Any LLM trouble keeps
    the items (the bands alone decide), so this tier can only remove noise, never fail a turn:
    a judge slower than `JUDGE_SHARE` of the inlet's deadline keeps them too and is left to
    finish (its scores cached), and with `MAX_LATE_JUDGES` already running only cached scores
    are used.
    """
    if not rt.settings.llm_relevance or not rt.llm.configured:
        return items
    middle = [f for f in items if ranking.needs_llm_score(f, params=params)]
    if not middle:
        return items
    memories = [f.candidate.memory for f in middle]
    if len(_late) >= MAX_LATE_JUDGES:
        known = rt.relevance_cache.known(query=query, memories=memories)
        if known is None:
            return items
        scores = known
    else:
        judge = asyncio.ensure_future(
            rt.relevance_cache.scores(rt.llm, query=query, memories=memories)
        )
        try:
            scores = await asyncio.wait_for(
                asyncio.shield(judge), timeout=rt.settings.context_deadline_s * JUDGE_SHARE
            )
        except TimeoutError:
            _leave_running(judge)
            log.info("LLM relevance judge slower than its share of the deadline: bands decide")
            return items
        except asyncio.CancelledError:
            # the inlet's own deadline passed meanwhile: the judge's answer is still worth caching
            _leave_running(judge)
            raise
        except Exception as exc:
            log.warning("LLM relevance tier skipped: %s", exc)
            return items
    return [f for f in items if f not in middle or scores.get(f.candidate.memory.id, 1.0) >= 0.5]
