"""Write and serve core memories profiles (DESIGN §6.1) — in the background, never inline."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from cachetools import TTLCache
from sqlalchemy.ext.asyncio import AsyncSession

from service.core import profile as policy
from service.core.profile import ProfileView
from service.core.records import Memory, ReadScope
from service.flows import cache_sync, planted_check
from service.flows.runtime import Runtime
from service.storage import memories, profiles
from service.storage.notifications import PROFILE_CHANGE, Change

log = logging.getLogger(__name__)

PROFILE_TASK = "refresh_profile"
PROFILE_QUEUE = "profiles"


async def refresh_profile(
    rt: Runtime, *, user_id: str, view: ProfileView, user_name: str | None = None
) -> str:
    """(Re)write one profile if its sources changed.

    Returns:
        "written", "unchanged", "removed" (fewer than 5 memories), "refused" (the answer
        was empty, only invented names and numbers, or read as an instruction) or "skipped"
        (no LLM).

    Raises:
        LLMUnavailable: the LLM failed (the job retries; the old profile stays).
    """
    scope = policy.view_scope(user_id, view)
    async with rt.db.unit_of_work() as session:
        recent, total = await memories.list_memories(
            session, scope=scope, limit=policy.SOURCE_MEMORIES, offset=0
        )
        current = await profiles.get(session, user_id=user_id, view=view.value)
        if total < policy.MIN_MEMORIES:
            if current is not None:
                await profiles.remove(session, user_id=user_id, view=view.value)
            return "removed"
    mark = policy.fingerprint(recent)
    if current is not None and current.fingerprint == mark:
        return "unchanged"
    if not rt.llm.configured:
        return "skipped"
    answer = await rt.llm.complete(
        policy.build_messages(user_name=user_name, memories=recent), max_tokens=400, temperature=0.2
    )
    grounded = policy.grounded_profile(
        policy.clean_profile(answer), memories=recent, user_name=user_name
    )
    text = policy.checked_profile(grounded) if grounded is not None else None
    if text is not None and await planted_check.refuses_any_sentence(rt, text):
        text = None  # the semantic layer of the check every stored text gets
    if text is None:
        # the previous profile (if any) stays: it passed the same checks
        log.warning(
            "the profile answer for %s is empty, invented or reads as an instruction; not stored",
            user_id,
        )
        return "refused"
    async with rt.db.unit_of_work() as session:
        # Sources forgotten while the LLM was writing must not come back through the profile.
        still, _ = await memories.list_memories(
            session, scope=scope, limit=policy.SOURCE_MEMORIES, offset=0
        )
        if policy.fingerprint(still) != mark:
            return "unchanged"
        await profiles.put(
            session,
            profile=profiles.Profile(
                user_id, view.value, text, tuple(m.id for m in recent), mark, datetime.now(UTC)
            ),
        )
    drop_cached(user_id)
    return "written"


async def request_refresh(rt: Runtime, *, user_id: str) -> None:
    """Queue a background refresh of both of the user's profiles (at most one waiting)."""
    for view in ProfileView:
        # False (one already waits) needs nothing more
        await rt.jobs.defer(
            PROFILE_TASK,
            queue=PROFILE_QUEUE,
            queueing_lock=f"profile:{user_id}:{view.value}",
            user_id=user_id,
            view=view.value,
        )


# Last profile text read per (user, view), for the inlet's degraded path only (the database
# is too slow to ask). Entries live 60 s and are dropped at once when any service process
# writes or withdraws that user's profile (a NOTIFY, flows/cache_sync.py); the normal path
# always reads the database.
_recent: TTLCache[tuple[str, str], str] = TTLCache(maxsize=5_000, ttl=60)


def cached_profile(*, user_id: str, collaborative: bool) -> str | None:
    """The profile text read for this user and view in the last minute, if any — never while
    this process may have missed a withdrawal (its change listener is not connected).
    """
    if not cache_sync.connected():
        return None
    return _recent.get((user_id, policy.view_for(collaborative=collaborative).value))


def invalidate(change: Change | None) -> None:
    """`cache_sync` handler: a user's profile changed somewhere (None: drop every text)."""
    if change is None:
        _recent.clear()
    elif change.kind == PROFILE_CHANGE:
        drop_cached(change.user_id)


def drop_cached(user_id: str) -> None:
    """Forget the cached profile texts of a user (after a withdrawal or a rewrite)."""
    for view in ProfileView:
        _recent.pop((user_id, view.value), None)


async def profile_for(rt: Runtime, *, user_id: str, collaborative: bool) -> str | None:
    """The stored profile text a chat may see; stale ones trigger a background refresh."""
    async with rt.db.unit_of_work() as session:
        return await read_profile(rt, session, user_id=user_id, collaborative=collaborative)


async def read_profile(
    rt: Runtime, session: AsyncSession, *, user_id: str, collaborative: bool
) -> str | None:
    """`profile_for` within the caller's unit of work."""
    view = policy.view_for(collaborative=collaborative)
    seen = cache_sync.epoch()
    found = await profiles.get(session, user_id=user_id, view=view.value)
    return _usable_text(rt, found, user_id=user_id, view=view, seen=seen)


async def read_profile_and_core(
    rt: Runtime,
    session: AsyncSession,
    *,
    user_id: str,
    collaborative: bool,
    scope: ReadScope,
    limit: int,
) -> tuple[str | None, list[Memory]]:
    """`read_profile` and the scope's `limit` core memories, read by one statement
    (`memories.profile_and_core_memories`): (the profile text, []) when the profile is
    usable, else (None, the core memories best first).

    Raises:
        ValueError: an empty `scope` or a `limit` < 1.
    """
    view = policy.view_for(collaborative=collaborative)
    seen = cache_sync.epoch()
    found, core = await memories.profile_and_core_memories(
        session, user_id=user_id, view=view.value, scope=scope, limit=limit
    )
    text = _usable_text(rt, found, user_id=user_id, view=view, seen=seen)
    return (text, []) if text else (None, core)


def _usable_text(
    rt: Runtime, found: profiles.Profile | None, *, user_id: str, view: ProfileView, seen: int
) -> str | None:
    """The stored profile's text if a chat may see it; caches it for the degraded path
    unless a withdrawal came in since `seen` (`cache_sync.epoch()` before the read).
    """
    text = policy.checked_profile(found.content) if found is not None else None
    if found is None or text is None:
        _recent.pop((user_id, view.value), None)
        return None
    if cache_sync.epoch() == seen:  # else a withdrawal came in meanwhile: don't cache the old
        _recent[(user_id, view.value)] = text
    if datetime.now(UTC) - found.built_at > timedelta(hours=rt.settings.profile_refresh_hours):
        _background(request_refresh(rt, user_id=user_id))  # user returns after a while
    return text


_pending: set[asyncio.Task[None]] = set()


def _background(coro: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine without making the caller wait (keeps a reference until done)."""
    task = asyncio.ensure_future(coro)
    _pending.add(task)
    task.add_done_callback(_pending.discard)
