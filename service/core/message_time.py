"""The date a memory is stated on: when the user wrote the message, not when the service got
round to it (pure).

A turn is often extracted well after it was written — batched until the chat goes quiet,
retried after an LLM outage, replayed or imported from an old chat — and the read path reads
the memory's date as the day the user said it: a remembered appointment whose date has passed
is marked as past (`core.past_events`), recency weighs its age (`core.ranking`), and every
injected item shows it. So the message's own timestamp (Open WebUI's `timestamp`, epoch
seconds, CONTRACT §3) dates the memory when it is believable; otherwise the moment the service
received the turn does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EARLIEST_WRITTEN = datetime(2000, 1, 1, tzinfo=UTC)
"""A message timestamp before this is a broken clock or a zero-ish default (Open WebUI did not
exist; no chat history a user imports is older), not a date to state a memory on."""

CLOCK_SKEW = timedelta(minutes=10)
"""How far ahead of the service's clock a message may be dated: the browser stamps the message
with its own clock (`Date.now()`), and a device without time sync drifts by minutes. A time
further ahead is a wrong clock, and a memory dated in the future would never be a past event
and would never age."""


def stated_at(written: datetime | None, *, arrived: datetime) -> datetime:
    """When a memory of a message is stated: `written` when believable, else `arrived`.

    Falls back to `arrived` when `written` is missing, before `EARLIEST_WRITTEN` (2000-01-01
    UTC), or later than `arrived` plus `CLOCK_SKEW` (10 minutes). A non-numeric timestamp never
    gets here: the API refuses it (422), and the filter sends none.

    Args:
        written: when the user wrote the message (aware), as the client stamped it; None when
            unknown.
        arrived: when the service received the turn (aware).

    Returns:
        An aware datetime, `written` unchanged (its offset kept) or `arrived`.
    """
    if written is None or written < EARLIEST_WRITTEN or written > arrived + CLOCK_SKEW:
        return arrived
    return written
