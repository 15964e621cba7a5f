"""A remembered event whose date has passed is marked as past when injected (issue 30 9b)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime

import pytest

from service.core.past_events import dates_in, passed_on, past_mark
from service.core.ranking import render_item
from service.core.records import RankedMemory
from tests.unit.test_injection import _memory

TODAY = date(2026, 3, 20)
STATED = date(2026, 3, 2)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("dentist on 2026-03-11", [date(2026, 3, 11)]),
        ("dentist on March 11, 2026 at 9", [date(2026, 3, 11)]),
        ("dentist on Mar 11th 2026", [date(2026, 3, 11)]),
        ("dentist on 11 March 2026", [date(2026, 3, 11)]),
        ("the 3rd of April 2026 and 2026-03-11", [date(2026, 4, 3), date(2026, 3, 11)]),
        ("room 2026-13-40, a phone 0151-2026-03-11-9, no year on March 11", []),
    ],
)
def test_dates_with_a_year_are_read_in_the_forms_extraction_writes(
    text: str, found: list[date]
) -> None:
    assert sorted(dates_in(text)) == sorted(found)


@pytest.mark.parametrize(
    ("text", "past"),
    [
        ("User has a dentist appointment on 2026-03-11", date(2026, 3, 11)),
        ("User flies to Lyon on March 2, 2026", date(2026, 3, 2)),  # the day it was said
        ("User has a check-up on 2026-04-02", None),  # still ahead
        ("User's exam is on 2026-03-20", None),  # today is not past
        ("User was born on 1990-05-04", None),  # never ahead: no event that passed
        ("User moved on 2026-03-05 and visits on 2026-04-10", None),  # the latest is ahead
        ("User keeps bees", None),
    ],
)
def test_an_event_is_past_when_it_was_ahead_when_stated_and_is_before_today(
    text: str, past: date | None
) -> None:
    assert passed_on(text, stated_on=STATED, today=TODAY) == past


def test_the_injected_line_says_the_event_is_past() -> None:
    stated = dataclasses.replace(
        _memory(1, "User has a dentist appointment on 2026-03-11"),
        created_at=datetime(2026, 3, 2, 9, tzinfo=UTC),
    )
    item = RankedMemory(stated, 0.9, 0.9)

    assert render_item(item, today=TODAY) == (
        "- [2026-03-02] User has a dentist appointment on 2026-03-11 (past: 2026-03-11 is "
        "before today, 2026-03-20)"
    )
    assert render_item(item) == "- [2026-03-02] User has a dentist appointment on 2026-03-11"
    assert past_mark("User keeps bees", stated_on=STATED, today=TODAY) == ""
