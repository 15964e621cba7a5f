"""Keyed fingerprints of the memories users forgot (migration 0016): digests, no text."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage.tables import ForgottenTextRow

__all__ = ["add", "known", "remove_user"]


async def add(session: AsyncSession, *, user_id: str, digests: Iterable[str]) -> None:
    """Keep these digests for `user_id` (a digest already kept stays as it is)."""
    rows = [{"user_id": user_id, "digest": d} for d in dict.fromkeys(digests)]
    if rows:
        await session.execute(insert(ForgottenTextRow).values(rows).on_conflict_do_nothing())


async def known(session: AsyncSession, *, user_id: str, digests: Iterable[str]) -> set[str]:
    """Those of `digests` kept for `user_id`."""
    wanted = list(dict.fromkeys(digests))
    if not wanted:
        return set()
    stmt = select(ForgottenTextRow.digest).where(
        ForgottenTextRow.user_id == user_id, ForgottenTextRow.digest.in_(wanted)
    )
    return {str(d) for d in (await session.execute(stmt)).scalars()}


async def remove_user(session: AsyncSession, *, user_id: str) -> None:
    """The account was deleted: nothing of its forgotten memories stays."""
    await session.execute(delete(ForgottenTextRow).where(ForgottenTextRow.user_id == user_id))
