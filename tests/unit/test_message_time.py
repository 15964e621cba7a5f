"""The date a memory is stated on (`service/core/message_time.py`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from service.core.message_time import CLOCK_SKEW, EARLIEST_WRITTEN, stated_at

ARRIVED = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "written",
    [
        ARRIVED - timedelta(days=10),  # an old chat replayed or imported
        ARRIVED - timedelta(seconds=2),  # live use
        ARRIVED + CLOCK_SKEW,  # a browser clock a little ahead
        EARLIEST_WRITTEN,
        datetime(2023, 5, 8, 15, 56, tzinfo=timezone(timedelta(hours=2))),
    ],
)
def test_a_believable_message_time_is_kept(written: datetime) -> None:
    assert stated_at(written, arrived=ARRIVED) is written


@pytest.mark.parametrize(
    "written",
    [
        None,
        ARRIVED + CLOCK_SKEW + timedelta(seconds=1),
        ARRIVED + timedelta(days=400),
        EARLIEST_WRITTEN - timedelta(seconds=1),
        datetime(1970, 1, 1, tzinfo=UTC),
    ],
)
def test_a_missing_or_impossible_message_time_gives_the_arrival(written: datetime | None) -> None:
    assert stated_at(written, arrived=ARRIVED) is ARRIVED
