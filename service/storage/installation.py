"""Per-installation secrets in the database, so every replica of the service shares them."""

from __future__ import annotations

import secrets

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.storage.tables import InstallationSecretRow

__all__ = ["SECRET_BYTES", "number", "secret"]

SECRET_BYTES = 32
"""Length of a generated secret (256 bits)."""


async def secret(session: AsyncSession, name: str) -> bytes:
    """The installation's secret called `name`, generated on first use.

    Replicas starting at once race to insert; ON CONFLICT DO NOTHING keeps the first row
    and every caller then reads that one, so all of them use the same secret.
    """
    await session.execute(
        insert(InstallationSecretRow)
        .values(name=name, secret=secrets.token_bytes(SECRET_BYTES))
        .on_conflict_do_nothing(index_elements=["name"])
    )
    value = await session.scalar(
        select(InstallationSecretRow.secret).where(InstallationSecretRow.name == name)
    )
    if value is None:  # the row was just written or already there; absence is a bug
        raise RuntimeError(f"installation secret {name!r} is missing after its insert")
    return bytes(value)


async def number(session: AsyncSession, name: str) -> int:
    """The number kept as installation secret `name` (8 bytes, big-endian), 0 when absent;
    never written here (migration 0011 writes the short ids' legacy limits).
    """
    value = await session.scalar(
        select(InstallationSecretRow.secret).where(InstallationSecretRow.name == name)
    )
    return int.from_bytes(bytes(value), "big") if value is not None else 0
