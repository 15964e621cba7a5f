"""Core memories profiles: read, write, and withdraw the ones built from a memory."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage import notifications
from service.storage.notifications import PROFILE_CHANGE
from service.storage.tables import ProfileRow


@dataclass(frozen=True, slots=True)
class Profile:
    """A stored profile."""

    user_id: str  #: whose profile
    view: str  #: "private" or "shared"
    content: str  #: the text, ≤ 200 words
    source_ids: tuple[uuid.UUID, ...]  #: memories it was written from
    fingerprint: int  #: of the source memories and their versions
    built_at: datetime  #: when it was written


# prebuilt Core select, read on every turn: the ORM's identity map and loading, or building
# the statement each time, cost more than the query
_GET = select(ProfileRow.__table__).where(
    ProfileRow.__table__.c.user_id == bindparam("user_id"),
    ProfileRow.__table__.c.view == bindparam("view"),
)


async def get(session: AsyncSession, *, user_id: str, view: str) -> Profile | None:
    """The user's profile for `view`, if one was written."""
    row = (await session.execute(_GET, {"user_id": user_id, "view": view})).first()
    return None if row is None else from_values(*row)


def from_values(
    user_id: str,
    view: str,
    content: str,
    source_ids: Sequence[uuid.UUID],
    memories_version: int,
    built_at: datetime,
) -> Profile:
    """A `Profile` from a `profiles` row's columns, in the table's order."""
    return Profile(user_id, view, content, tuple(source_ids), memories_version, built_at)


async def put(session: AsyncSession, *, profile: Profile) -> None:
    """Write (or replace) a profile."""
    values = {
        "user_id": profile.user_id,
        "view": profile.view,
        "content": profile.content,
        "source_ids": list(profile.source_ids),
        "memories_version": profile.fingerprint,
        "built_at": profile.built_at,
    }
    stmt = pg_insert(ProfileRow).values(**values)
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=["user_id", "view"],
            set_={k: v for k, v in values.items() if k not in ("user_id", "view")},
        )
    )
    await notifications.notify(session, kind=PROFILE_CHANGE, user_ids=[profile.user_id])


async def remove(session: AsyncSession, *, user_id: str, view: str) -> None:
    """Delete a profile (too few memories left)."""
    await session.execute(
        delete(ProfileRow).where(ProfileRow.user_id == user_id, ProfileRow.view == view)
    )
    await notifications.notify(session, kind=PROFILE_CHANGE, user_ids=[user_id])


async def remove_user(session: AsyncSession, *, user_id: str) -> None:
    """Delete every profile of a user (their account was deleted)."""
    await session.execute(delete(ProfileRow).where(ProfileRow.user_id == user_id))
    await notifications.notify(session, kind=PROFILE_CHANGE, user_ids=[user_id])


async def withdraw_using(session: AsyncSession, *, memory_ids: Sequence[uuid.UUID]) -> list[str]:
    """Delete every profile written from any of `memory_ids`; returns their users."""
    stmt = (
        delete(ProfileRow)
        .where(ProfileRow.source_ids.overlap(list(memory_ids)))
        .returning(ProfileRow.user_id)
    )
    users = sorted(set((await session.execute(stmt)).scalars()))
    await notifications.notify(session, kind=PROFILE_CHANGE, user_ids=users)
    return users
