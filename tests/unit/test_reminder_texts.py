"""Reminder ids, who may set and see reminders, and the texts shown to the model and the user."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from service.core import commands
from service.core.records import ChatContext, ChatKind
from service.core.reminders import (
    Reminder,
    RequestOutcome,
    TriggerKind,
    list_text,
    notice,
    owner_of,
    parse_reminder_code,
    reminder_code,
    render_section,
)

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 3, 13, 9, 30, tzinfo=UTC)


def _reminder(
    seq: int,
    content: str = "call the vet",
    *,
    cue: str | None = None,
    due_at: datetime | None = datetime(2026, 3, 12, 23, 0, tzinfo=UTC),
    all_day: bool = True,
    fired_at: datetime | None = None,
) -> Reminder:
    return Reminder(
        seq=seq,
        user_id="u",
        content=content,
        trigger=TriggerKind.CONTEXT if cue else TriggerKind.TIME,
        due_at=None if cue else due_at,
        all_day=all_day and not cue,
        timezone="Europe/Berlin",
        cue=cue,
        created_at=datetime(2026, 3, 10, 14, 0, tzinfo=UTC),
        fired_at=fired_at,
        cancelled_at=None,
        source_chat_id="c1",
    )


@pytest.mark.parametrize("seq", [1, 2, 77, 123_456, 2**30 - 1])
def test_reminder_ids_round_trip_and_never_read_as_memory_ids(seq: int) -> None:
    code = reminder_code(seq)
    assert code == "r-" + commands.encode_id(seq)
    assert parse_reminder_code(code) == seq
    assert parse_reminder_code(code.upper().replace("-", "")) == seq
    assert commands.parse_id(code) is None
    assert parse_reminder_code(commands.encode_id(seq)) is None


@pytest.mark.parametrize(
    ("kind", "collaborative", "owner"),
    [
        (ChatKind.SAVED, False, "u1"),
        (ChatKind.SAVED, True, None),
        (ChatKind.CHANNEL, True, None),
        (ChatKind.TEMPORARY, False, None),
        (ChatKind.API, False, None),
        (ChatKind.AUTOMATED, False, None),
        (ChatKind.TASK, False, None),
    ],
)
def test_only_private_saved_chats_set_and_fire_reminders(
    kind: ChatKind, collaborative: bool, owner: str | None
) -> None:
    chat = ChatContext(user_id="u1", kind=kind, chat_id="c1", collaborative=collaborative)
    assert owner_of(chat) == owner


def test_due_reminders_and_a_new_one_are_rendered_for_the_model() -> None:
    due = [_reminder(5), _reminder(6, "buy seeds", cue="the garden")]
    evening = datetime(2026, 3, 13, 17, 0, tzinfo=UTC)
    outcome = RequestOutcome(
        "remind me at 18:00 to stretch",
        _reminder(7, "stretch", due_at=evening, all_day=False),
        None,
    )
    assert render_section(due, outcome, zone=BERLIN) == (
        "Reminders (the user asked to be reminded of these now; remind them briefly before "
        "answering):\n"
        "- call the vet (asked on Tue 10 Mar 2026; due on Fri 13 Mar 2026)\n"
        "- buy seeds (asked on Tue 10 Mar 2026; due when “the garden” comes up)\n\n"
        f"Reminder set by this message (confirm it in one short sentence): “stretch”, due on "
        f"Fri 13 Mar 2026 at 18:00 (Europe/Berlin), id {reminder_code(7)}. The user can see "
        f"and cancel reminders with /memory reminders and /memory forget {reminder_code(7)}."
    )
    assert notice(due, outcome, zone=BERLIN) == (
        "2 reminders: call the vet; buy seeds · Reminder set: stretch — on Fri 13 Mar 2026 at "
        f"18:00 ({reminder_code(7)})"
    )


def test_a_request_that_was_not_set_is_explained_not_confirmed() -> None:
    outcome = RequestOutcome("remind me to call the vet", None, "I could not tell when")
    assert render_section([], outcome, zone=BERLIN) == (
        "Reminder NOT set: I could not tell when. Tell the user so in one short sentence and "
        "ask for what is missing; do not claim it was set."
    )
    assert notice([], outcome, zone=BERLIN) == "Reminder not set: I could not tell when"
    assert render_section([], None, zone=BERLIN) == ""
    assert notice([], None, zone=BERLIN) is None


def test_a_whole_day_shows_as_the_day_it_was_asked_for_in_any_zone() -> None:
    # due 00:00 Friday in Berlin is still Thursday in New York; the day asked for is Friday
    listing = list_text([_reminder(5)], now=NOW, zone=ZoneInfo("America/New_York"))
    assert "on Fri 13 Mar 2026 · call the vet" in listing


def test_the_listing_shows_pending_first_then_recently_done() -> None:
    items = [
        _reminder(1, "old news", fired_at=NOW - timedelta(days=8)),
        _reminder(2, "buy seeds", cue="the garden"),
        _reminder(3, "call the vet", fired_at=NOW - timedelta(hours=2)),
        _reminder(4, "stretch*", due_at=datetime(2026, 3, 13, 17, 0, tzinfo=UTC), all_day=False),
    ]
    assert list_text(items, now=NOW, zone=BERLIN) == (
        "**Reminders** (2 pending, 1 done; times in Europe/Berlin):\n\n"
        f"- `{reminder_code(4)}` on Fri 13 Mar 2026 at 18:00 · stretch\\*\n"
        f"- `{reminder_code(2)}` when “the garden” comes up · buy seeds\n"
        f"- `{reminder_code(3)}` done, shown on Fri 13 Mar 2026 at 08:30 · call the vet\n\n"
        "Cancel one with `/memory forget <id>`."
    )


def test_no_reminders_says_how_to_ask_for_one() -> None:
    assert list_text([], now=NOW, zone=BERLIN) == (
        "You have no reminders. Ask for one in a chat, e.g. “remind me on Friday to call the "
        "vet” or “remind me when we talk about the garden to buy seeds”."
    )
