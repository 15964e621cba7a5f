"""The service's timestamp loaders read every value exactly as psycopg's own do, and clamp
what Python cannot hold (storage/db.py)."""

from __future__ import annotations

from datetime import datetime

import psycopg
import pytest

from service.storage import db

ZONES = ("UTC", "Europe/Paris", "America/Los_Angeles", "Asia/Kolkata", "Australia/Lord_Howe")
VALUES = (
    "2026-12-01 17:05:17.123456+00",
    "2026-03-29 01:59:59.999999+00",  # a second before Paris goes to summer time
    "2026-03-29 02:00:00+00",
    "2026-10-25 01:00:00.5+00",
    "1970-01-01 00:00:00+00",
    "1900-06-15 12:00:00+00",  # local mean time offsets with seconds
    "0001-01-01 12:00:00+00",
    "9999-12-31 12:00:00+00",
    "2000-02-29 23:59:59.000001+00",
)
ODD = {
    "0001-01-01 00:00:00+00 BC": db._OLDEST,
    "20000-01-01 00:00:00+00": db._NEWEST,
    "infinity": db._NEWEST,
    "-infinity": db._OLDEST,
}


async def _read(url: str, zone: str, values: list[str], *, clamped: bool, binary: bool) -> list:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        if clamped:
            db._read_any_timestamp(conn)
        await conn.execute(f"SET TIME ZONE '{zone}'")
        cur = conn.cursor(binary=binary)
        await cur.execute("SELECT unnest(%s::text[])::timestamptz", (values,))
        return [row[0] for row in await cur.fetchall()]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
async def test_every_readable_timestamp_loads_as_psycopg_loads_it(
    database_url: str, binary: bool
) -> None:
    checked = 0
    for zone in ZONES:
        ours = await _read(database_url, zone, list(VALUES), clamped=True, binary=binary)
        theirs = await _read(database_url, zone, list(VALUES), clamped=False, binary=binary)
        for mine, reference in zip(ours, theirs, strict=True):
            assert isinstance(mine, datetime)
            assert (mine, mine.utcoffset(), mine.isoformat()) == (
                reference,
                reference.utcoffset(),
                reference.isoformat(),
            )
            checked += 1
    assert checked == len(ZONES) * len(VALUES)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
async def test_a_timestamp_python_cannot_hold_loads_as_the_nearest_it_can(
    database_url: str, binary: bool
) -> None:
    got = await _read(database_url, "UTC", list(ODD), clamped=True, binary=binary)
    assert got == list(ODD.values())
