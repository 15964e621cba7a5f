"""Reminders (prospective memory): the record, who may set and see them, and their texts.

A reminder is something a user asked to be told later, with a trigger: a time, or a context
(a later message close in meaning to a cue). Due reminders are injected once, in a
"Reminders" section of the inlet's block. Source: the founding design's prospective memory
(seeds/003, "Prospective Memory": time- and context-based triggers, checked before every
prompt assembly, injected into a "Reminders" section; a context trigger fires when the
similarity to its cue exceeds 0.7) and issue #7. Reading requests out of a message is in
`core/reminder_parsing.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from service.core import commands, privacy, safety
from service.core.records import Bank, ChatContext

DONE_LISTED_DAYS = 7
"""Days a fired reminder stays in `/memory reminders` as done (it stays in the export)."""
ID_PREFIX = "r-"
"""Reminder ids are `r-` + a six-character code, so they never read as a memory's id."""


class TriggerKind(StrEnum):
    """What makes a reminder due; values are what the database stores."""

    TIME = "time"  #: due from a moment on
    CONTEXT = "context"  #: due when a later message is close in meaning to the cue


class ReminderState(StrEnum):
    """Where a reminder is in its life."""

    PENDING = "pending"  #: waiting for its trigger
    FIRED = "fired"  #: shown once; kept as done
    CANCELLED = "cancelled"  #: forgotten by the user: content-free tombstone


@dataclass(frozen=True, slots=True)
class Reminder:
    """One reminder as it leaves storage."""

    seq: int  #: row id; users see it as `r-` + the short code
    user_id: str  #: the user who asked (the only one who ever sees it)
    content: str  #: what to remind of, in the user's words; "" once cancelled
    trigger: TriggerKind  #: time or context
    due_at: datetime | None  #: time trigger: when it is due (UTC)
    all_day: bool  #: time trigger: due from the start of that day in `timezone`
    timezone: str  #: IANA zone the time was read in ("UTC" when unknown)
    cue: str | None  #: context trigger: the topic that makes it due
    created_at: datetime  #: when it was asked for (UTC)
    fired_at: datetime | None  #: when it was shown (UTC)
    cancelled_at: datetime | None  #: when it was cancelled (UTC)
    source_chat_id: str | None  #: chat it was asked in

    @property
    def state(self) -> ReminderState:
        """Pending, fired or cancelled."""
        if self.cancelled_at is not None:
            return ReminderState.CANCELLED
        if self.fired_at is not None:
            return ReminderState.FIRED
        return ReminderState.PENDING

    @property
    def code(self) -> str:
        """The id users type: `r-k7m2qa`."""
        return reminder_code(self.seq)


def reminder_code(seq: int) -> str:
    """`r-` + the six-character code of a reminder's row id (the memory id scheme)."""
    return ID_PREFIX + commands.encode_reminder_id(seq)


def parse_reminder_code(token: str) -> int | None:
    """Row id of a reminder id as typed (`r-k7m2qa`, `R-K7M2QA`, `rk7m2qa`), or None.

    A six-character token is a memory id and never a reminder's.
    """
    word = token.strip().lstrip("#").lower().replace("-", "")
    if len(word) != commands.ID_CHARS + 1 or not word.startswith("r"):
        return None
    return commands.parse_reminder_id(word[1:])


def owner_of(chat: ChatContext) -> str | None:
    """The user whose reminders this chat may set, fire and change, or None.

    Reminders are personal: they follow the Personal bank's rules (DESIGN §3). Only a chat
    that may write the sender's Personal bank — a private saved chat — sets and fires them;
    collaborative chats never show them, temporary chats never write.
    """
    if privacy.write_scope(chat).scope_for(Bank.PERSONAL) is None:
        return None
    return chat.user_id


def may_list(chat: ChatContext) -> bool:
    """True when the chat may show the sender's reminders (reading Personal is allowed)."""
    return Bank.PERSONAL in privacy.read_scope(chat).banks


def resolve_zone(name: str | None) -> tuple[tzinfo, str]:
    """The user's IANA time zone ("Europe/Berlin"), or UTC when missing or unknown.

    Returns:
        (the zone, its name as used: `name` or "UTC").
    """
    if name and name.strip():
        try:
            return ZoneInfo(name.strip()), name.strip()
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    return UTC, "UTC"


def describe_trigger(reminder: Reminder, zone: tzinfo) -> str:
    """The trigger in the user's terms: "on Fri 13 Mar 2026 at 09:00", "when “x” comes up".

    A clock time is shown in `zone` (the chat's); a whole day in the zone it was asked in,
    whose day it is.
    """
    if reminder.trigger is TriggerKind.CONTEXT:
        return f"when “{safety.inert(reminder.cue or '')}” comes up"
    assert reminder.due_at is not None
    if reminder.all_day:
        zone = resolve_zone(reminder.timezone)[0]
    return describe_time(reminder.due_at, all_day=reminder.all_day, zone=zone)


def describe_time(at: datetime, *, all_day: bool, zone: tzinfo) -> str:
    """A moment in `zone`: "on Fri 13 Mar 2026" or "on Fri 13 Mar 2026 at 09:00"."""
    local = at.astimezone(zone)
    day = f"on {local:%a} {local.day} {local:%b %Y}"
    return day if all_day else f"{day} at {local:%H:%M}"


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """What became of a reminder request in a message."""

    text: str  #: the request as typed
    reminder: Reminder | None  #: the reminder it set (also when set by an earlier inlet)
    problem: str | None  #: why nothing was set, as a sentence; None when set


SECTION_HEADER = (
    "Reminders (the user asked to be reminded of these now; remind them briefly before answering):"
)
NOT_IN_SHARED_CHAT = "reminders are personal, so they are only set in your own private chats"
NOT_IN_TEMPORARY_CHAT = "a temporary chat saves nothing; ask again in a normal chat"


def render_section(due: Sequence[Reminder], outcome: RequestOutcome | None, *, zone: tzinfo) -> str:
    """The "Reminders" section of the inlet's block; "" when there is nothing to say.

    Due reminders are listed for the model to pass on; a request in this message is either
    confirmed (with its id) or explained, so the reply never pretends a reminder was set.
    """
    parts: list[str] = []
    if due:
        lines = "\n".join(
            f"- {safety.inert(safety.redact_secrets(r.content))} "
            f"(asked {describe_time(r.created_at, all_day=True, zone=zone)}; "
            f"due {describe_trigger(r, zone)})"
            for r in due
        )
        parts.append(f"{SECTION_HEADER}\n{lines}")
    if outcome is not None and outcome.reminder is not None:
        r = outcome.reminder
        where = f" ({_zone_name(zone)})" if r.trigger is TriggerKind.TIME else ""
        parts.append(
            f"Reminder set by this message (confirm it in one short sentence): "
            f"“{safety.inert(safety.redact_secrets(r.content))}”, due "
            f"{describe_trigger(r, zone)}{where}, id {r.code}. "
            f"The user can see and cancel reminders with /memory reminders and "
            f"/memory forget {r.code}."
        )
    elif outcome is not None:
        parts.append(
            f"Reminder NOT set: {outcome.problem}. Tell the user so in one short "
            "sentence and ask for what is missing; do not claim it was set."
        )
    return "\n\n".join(parts)


def notice(due: Sequence[Reminder], outcome: RequestOutcome | None, *, zone: tzinfo) -> str | None:
    """One status line for the user about this turn's reminders, or None."""
    lines = []
    if due:
        lines.append(
            ("Reminder: " if len(due) == 1 else f"{len(due)} reminders: ")
            + "; ".join(r.content for r in due)
        )
    if outcome is not None and outcome.reminder is not None:
        r = outcome.reminder
        lines.append(f"Reminder set: {r.content} — {describe_trigger(r, zone)} ({r.code})")
    elif outcome is not None:
        lines.append(f"Reminder not set: {outcome.problem}")
    return " · ".join(lines) or None


def listed(reminders: Sequence[Reminder], *, now: datetime) -> list[Reminder]:
    """What `/memory reminders` shows: pending ones by due time (context ones last), then
    those fired in the last `DONE_LISTED_DAYS` days, newest first.
    """
    pending = [r for r in reminders if r.state is ReminderState.PENDING]
    pending.sort(key=lambda r: (r.trigger is TriggerKind.CONTEXT, r.due_at or r.created_at, r.seq))
    since = now - timedelta(days=DONE_LISTED_DAYS)
    done = [
        r
        for r in reminders
        if r.state is ReminderState.FIRED and r.fired_at is not None and r.fired_at >= since
    ]
    done.sort(key=lambda r: (r.fired_at, r.seq), reverse=True)
    return [*pending, *done]


def list_text(reminders: Sequence[Reminder], *, now: datetime, zone: tzinfo) -> str:
    """The exact answer of `/memory reminders` (Markdown; contents escaped)."""
    shown = listed(reminders, now=now)
    if not shown:
        return (
            "You have no reminders. Ask for one in a chat, e.g. “remind me on Friday to "
            "call the vet” or “remind me when we talk about the garden to buy seeds”."
        )
    pending = sum(r.state is ReminderState.PENDING for r in shown)
    lines = []
    for r in shown:
        when = describe_trigger(r, zone)
        if r.state is ReminderState.FIRED:
            assert r.fired_at is not None
            when = f"done, shown {describe_time(r.fired_at, all_day=False, zone=zone)}"
        lines.append(
            f"- `{r.code}` {commands.escape_markdown(when)} · {commands.escape_markdown(r.content)}"
        )
    counts = f"{pending} pending, {len(shown) - pending} done"
    return (
        f"**Reminders** ({counts}; times in {_zone_name(zone)}):\n\n"
        + "\n".join(lines)
        + "\n\nCancel one with `/memory forget <id>`."
    )


def export_json(reminders: Sequence[Reminder]) -> list[dict[str, object]]:
    """Reminders as plain JSON objects (`/memory export`, the reminders API)."""
    return [
        {
            "id": r.code,
            "content": r.content,
            "trigger": r.trigger.value,
            "due_at": r.due_at.isoformat() if r.due_at else None,
            "all_day": r.all_day,
            "timezone": r.timezone,
            "cue": r.cue,
            "state": r.state.value,
            "created_at": r.created_at.isoformat(),
            "fired_at": r.fired_at.isoformat() if r.fired_at else None,
            "source_chat_id": r.source_chat_id,
        }
        for r in reminders
    ]


def _zone_name(zone: tzinfo) -> str:
    return getattr(zone, "key", None) or str(zone)
