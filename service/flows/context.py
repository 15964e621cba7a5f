"""Inlet: the memories a turn may see, ranked and rendered (DESIGN §6)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from service.core import privacy, ranking
from service.core.records import ChatContext, RankedMemory
from service.flows.runtime import Runtime
from service.storage import memories, user_state


@dataclass(frozen=True, slots=True)
class ContextResult:
    """What the inlet injects."""

    block: str  #: text to append to the system message; "" for nothing
    items: list[RankedMemory]  #: the injected memories, best first
    profile: str | None  #: the core memories profile, if any
    status: str  #: one line for the user


async def build_context(
    rt: Runtime, *, chat: ChatContext, message: str, budget_tokens: int | None,
    now: datetime | None,
) -> ContextResult:
    """Rank the memories this chat may read against `message` and render the block.

    Args:
        chat: the turn's context; its read scope is applied inside the SQL (DESIGN §3).
        message: text of the last user message.
        budget_tokens: token budget of the injected items (None = the configured default).
        now: time of the turn (tz-aware); None = the server clock.
    """
    scope = privacy.read_scope(chat)
    if not scope or not message.strip():
        return ContextResult("", [], None, "no memory for this kind of chat" if not scope
                             else "nothing to look up")
    now = now or datetime.now(UTC)
    params = rt.ranking_params(budget_tokens)
    query_vector = await rt.encoder.encode_one(message)
    async with rt.db.unit_of_work() as session:
        candidates = await memories.search(session, scope=scope, query_vector=query_vector,
                                           limit=rt.settings.candidate_limit)
        ranked = ranking.rank_candidates(candidates, now=now, params=params)
        core = await memories.core_memories(session, scope=scope,
                                            limit=rt.settings.core_max_items)
        core_items, relevant = ranking.split_core(core, ranked, budget_tokens=params.budget_tokens)
        chosen = ranking.fit_budget(
            relevant, budget_tokens=params.budget_tokens - ranking.cost(core_items),
            max_items=params.max_items)
        used = [*core_items, *chosen]
        at = datetime.now(UTC)
        await memories.mark_used(session, memory_ids=[m.memory.id for m in used], at=at)
        if chat.chat_id:
            await user_state.record_injection(
                session, user_id=chat.user_id, chat_id=chat.chat_id, at=at,
                items=[{"seq": m.memory.seq, "similarity": round(m.similarity, 4),
                        "score": round(m.score, 4)} for m in used])
    block = ranking.render_block(profile=None, core=core_items, items=chosen)
    status = f"{len(used)} memories recalled" if used else "no relevant memories"
    return ContextResult(block, used, None, status)
