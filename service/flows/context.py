"""Inlet: the memories a turn may see, ranked and rendered (DESIGN §6)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from service import observability
from service.core import commands as text
from service.core import injection, privacy, ranking, safety
from service.core.ranking import RankingParams
from service.core.records import ChatContext, Memory, RankedMemory, ReadScope
from service.core.reminders import Reminder, owner_of, resolve_zone
from service.flows import candidates, passages, relevance
from service.flows import profile as profile_flow
from service.flows import reminders as reminders_flow
from service.flows.runtime import Runtime
from service.storage import memories, memory_search, user_state

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ContextResult:
    """What the inlet injects."""

    block: str  #: text to append to the system message; "" for nothing
    items: list[RankedMemory]  #: the injected memories, best first
    profile: str | None  #: the core memories profile, if any
    status: str  #: one line for the user
    reminders: list[Reminder] = field(default_factory=list)  #: fired by this turn
    notice: str | None = None  #: a status line about reminders, for the user
    core_count: int = 0  #: how many of `items`, first, are core memories (not query-chosen)


async def retrieve(
    rt: Runtime,
    *,
    scope: ReadScope,
    query: str,
    now: datetime,
    limit: int,
    params: RankingParams | None = None,
    apply_gate: bool = False,
    query_vector: np.ndarray | None = None,
) -> list[RankedMemory]:
    """The read path's ranking for one query, best first (DESIGN §6.2).

    Vector candidates (top `candidate_limit`: exact, or through a bank's own HNSW index
    when it has very many memories) and full-text candidates are fused by RRF, blended with
    recency and diversified by MMR. With `apply_gate` the relevance bands (and the optional
    LLM tier) drop what is not relevant enough to inject; without it the full ranking comes
    back (what the retrieval benchmark measures).

    Args:
        scope: cells the query may read; applied in SQL.
        query: the user's message.
        now: the time of the turn (tz-aware).
        limit: most items returned.
        query_vector: (384,) embedding of `query` if already computed.
    """
    params = params or rt.ranking_params()
    if not scope or not query.strip():
        return []
    # the words the model reads are the ones looked up (vector and full text alike): a
    # 15,000-character message costs what its first 256 word pieces do
    query = await rt.encoder.read_text(query)
    vector = query_vector if query_vector is not None else await rt.encoder.encode_one(query)
    found = await candidates.gather(
        rt, scope=scope, query=query, query_vector=vector, limit=rt.settings.candidate_limit
    )
    if params.long_memory_chars > 0:
        found = await passages.rescore(rt, found, vector, min_chars=params.long_memory_chars)
    fused = ranking.fuse(
        found.semantic,
        found.keyword,
        params=params,
        query_terms=found.query_terms,
        query_idf=found.query_idf,
    )
    fill: list[ranking.Fused] = []
    if apply_gate:
        passed = [f for f in fused if ranking.passes_gate(f, params=params)]
        if params.nearest_fill:
            kept = {id(f) for f in passed}
            fill = ranking.nearest_fill(
                (f for f in fused if id(f) not in kept),
                params=params,
                best_cosine=max((c.cosine for c in found.semantic), default=1.0),
            )
        fused = await relevance.apply_llm_tier(rt, query=query, items=passed, params=params)
    scored = ranking.score_fused(fused, now=now, params=params)
    # diversity among the best 2×limit only; their similarities come from PostgreSQL
    head = scored[: max(2 * limit, 20)]
    similarity = None
    if params.mmr_lambda < 1.0 and len(head) > 1:
        async with rt.db.unit_of_work() as session:
            similarity = await memory_search.pairwise_similarity(
                session, seqs=[r.memory.seq for r in head]
            )
    picked = ranking.diversify(head, similarity, lambda_=params.mmr_lambda, limit=limit)
    if fill and len(picked) < limit:
        # behind the gated items, nearest first: they only take the budget those left
        extra = ranking.score_fused(fill, now=now, params=params)
        order = {f.candidate.memory.seq: i for i, f in enumerate(fill)}
        extra.sort(key=lambda r: order[r.memory.seq])
        picked += extra[: limit - len(picked)]
    return picked


async def build_context(
    rt: Runtime,
    *,
    chat: ChatContext,
    message: str,
    budget_tokens: int | None,
    now: datetime | None,
    message_id: str | None = None,
) -> ContextResult:
    """The block for the inlet: the memories (`recall`) and the "Reminders" section.

    Due reminders are fired beside the memories' ranking but outside its deadline, so the
    deadline's fallback never drops a reminder already marked fired (flows/reminders.py).

    Args:
        message_id: the user message's id; keys a reminder it asks for (None: its text).
    """
    now = now or datetime.now(UTC)
    if message.strip() and owner_of(chat) is not None and privacy.read_scope(chat):
        # both steps need the message's vector (the reminders already before any deadline):
        # embed it once, both find it in the cache
        await rt.encoder.encode_one(message)
    # independent of each other; for_turn never raises, recall degrades within its deadline
    turn, result = await asyncio.gather(
        reminders_flow.for_turn(rt, chat=chat, message=message, now=now, message_id=message_id),
        recall(rt, chat=chat, message=message, budget_tokens=budget_tokens, now=now),
    )
    if not turn.section:
        return result
    return dataclasses.replace(
        result,
        block="\n\n".join(p for p in (result.block, turn.section) if p),
        reminders=turn.due,
        notice=turn.notice,
    )


async def recall(
    rt: Runtime,
    *,
    chat: ChatContext,
    message: str,
    budget_tokens: int | None,
    now: datetime | None,
) -> ContextResult:
    """Rank the memories this chat may read against `message` and render the block.

    Within `MEMORY_CONTEXT_DEADLINE_S` (the service's own inlet deadline); past it the turn
    degrades to the cached core profile, then to nothing, so the filter never times out
    because of a slow database or model.

    Args:
        chat: the turn's context; its read scope is applied inside the SQL (DESIGN §3).
        message: text of the last user message; "" for a message without text (only an
            image or a file): nothing to rank against, so the turn gets what every turn gets,
            the core profile (or the core memories).
        budget_tokens: token budget of the injected items (None = the configured default).
        now: time of the turn (tz-aware); None = the server clock.
    """
    scope = privacy.read_scope(chat)
    if not scope:
        return ContextResult("", [], None, "no memory for this kind of chat")
    try:
        return await asyncio.wait_for(
            _build(
                rt,
                chat=chat,
                scope=scope,
                message=message,
                budget_tokens=budget_tokens,
                now=now or datetime.now(UTC),
            ),
            timeout=rt.settings.context_deadline_s,
        )
    except TimeoutError:
        observability.record_inlet_timeout()
        log.warning(
            "context deadline of %.2f s passed; answering with the cached profile",
            rt.settings.context_deadline_s,
        )
        cached = (
            profile_flow.cached_profile(user_id=chat.user_id, collaborative=chat.collaborative)
            if privacy.uses_profile(chat)
            else None
        )
        profile = injection.fit_profile(
            cached, budget_tokens=rt.ranking_params(budget_tokens).budget_tokens
        )
        return ContextResult(
            ranking.render_block(profile=profile, core=[], items=[]), [], profile, DEGRADED
        )


DEGRADED = "memory was slow: answered with the cached profile only"


async def _build(
    rt: Runtime,
    *,
    chat: ChatContext,
    scope: ReadScope,
    message: str,
    budget_tokens: int | None,
    now: datetime,
) -> ContextResult:
    params = rt.ranking_params(budget_tokens)
    # the profile (or the core memories) does not depend on the ranking: read it alongside
    ranked = asyncio.ensure_future(
        retrieve(
            rt,
            scope=scope,
            query=message,
            now=now,
            limit=params.max_items,
            params=params,
            apply_gate=True,
        )
        if message.strip()
        else _nothing_ranked()
    )
    known = asyncio.ensure_future(_profile_or_core(rt, chat=chat, scope=scope))
    try:
        relevant, (profile, core) = await asyncio.gather(ranked, known)
    except BaseException:
        ranked.cancel()
        known.cancel()
        raise
    # read-time guard: nothing instruction-like is injected, whatever was stored earlier
    relevant = [r for r in relevant if not safety.looks_like_instruction(r.memory.content)]
    core = [m for m in core if not safety.looks_like_instruction(m.content)]
    # one budget for the profile and the items, and no fact twice (core/injection.py)
    # the user's date, in their zone: an event whose date passed is marked as past
    today = now.astimezone(resolve_zone(chat.timezone)[0]).date()
    parts = injection.compose(
        profile=profile,
        core=core,
        relevant=relevant,
        budget_tokens=params.budget_tokens,
        max_items=params.max_items,
        today=today,
    )
    used = [*parts.core, *parts.items]
    if used:
        _track_use_record(chat, _in_background(_record_use(rt, chat=chat, used=used)))
    block = ranking.render_block(
        profile=parts.profile, core=parts.core, items=parts.items, today=today
    )
    status = (
        f"{text.counted(len(used), 'memory', 'memories')} recalled"
        if used or parts.profile
        else "no relevant memories"
    )
    return ContextResult(block, used, parts.profile, status, core_count=len(parts.core))


async def _nothing_ranked() -> list[RankedMemory]:
    """A message without text ranks nothing (its core memories still go with it)."""
    return []


async def _profile_or_core(
    rt: Runtime,
    *,
    chat: ChatContext,
    scope: ReadScope,
) -> tuple[str | None, list[Memory]]:
    """The chat's core memories profile, or without one its core memories (DESIGN §6.1).

    An assistant with its own memory never gets the profile (it is written from Personal
    and Interaction Patterns): its core memories are the best of its own memory.
    """
    limit = rt.settings.core_max_items
    async with rt.db.reads() as session:  # reads only: no transaction needed
        if privacy.uses_profile(chat) and limit > 0:  # one statement for both
            return await profile_flow.read_profile_and_core(
                rt,
                session,
                user_id=chat.user_id,
                collaborative=chat.collaborative,
                scope=scope,
                limit=limit,
            )
        if privacy.uses_profile(chat):
            profile = await profile_flow.read_profile(
                rt, session, user_id=chat.user_id, collaborative=chat.collaborative
            )
            if profile:
                return profile, []
        return None, await memories.core_memories(session, scope=scope, limit=limit)


async def _record_use(rt: Runtime, *, chat: ChatContext, used: list[RankedMemory]) -> None:
    """Last-used times and the `/memory why` record, written after the answer went out."""
    at = datetime.now(UTC)
    try:
        async with rt.db.unit_of_work() as session:
            await user_state.record_use(
                session,
                user_id=chat.user_id,
                chat_id=chat.chat_id or None,
                at=at,
                memory_ids=[m.memory.id for m in used],
                items=[
                    {
                        "seq": m.memory.seq,
                        "similarity": round(m.similarity, 4),
                        "score": round(m.score, 4),
                    }
                    for m in used
                ],
            )
    except Exception:
        log.exception("could not record which memories were used")


USE_RECORD_WAIT_S = 5.0
"""How long `/memory why` waits for the record of the reply before it. The record is one
statement, so the wait ends within milliseconds unless the database stalls; then the
answer says what is recorded so far rather than hang the command."""

_pending: set[asyncio.Task[None]] = set()
#: (user, chat) → its `/memory why` records this process is still writing
_use_records: dict[tuple[str, str], set[asyncio.Task[None]]] = {}


async def use_recorded(chat: ChatContext) -> None:
    """Return once the `/memory why` records of `chat` that this process was still writing
    are committed (at most USE_RECORD_WAIT_S): the record is written after the answer went
    out, and a user may ask why before it lands.
    """
    in_flight = _use_records.get((chat.user_id, chat.chat_id))
    if in_flight:
        await asyncio.wait(set(in_flight), timeout=USE_RECORD_WAIT_S)


def _track_use_record(chat: ChatContext, task: asyncio.Task[None]) -> None:
    key = (chat.user_id, chat.chat_id)
    _use_records.setdefault(key, set()).add(task)

    def done(finished: asyncio.Task[None]) -> None:
        in_flight = _use_records.get(key)
        if in_flight is not None:
            in_flight.discard(finished)
            if not in_flight:
                del _use_records[key]

    task.add_done_callback(done)


def _in_background(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    task = asyncio.ensure_future(coro)
    _pending.add(task)
    task.add_done_callback(_pending.discard)
    return task
