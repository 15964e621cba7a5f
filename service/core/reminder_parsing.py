"""Reading a reminder request ("remind me on Friday to call the vet") out of a chat message.

Deterministic, so an explicit request works without any LLM and the same turn can confirm it:

1. a request starts at "remind me" or "set a reminder" and runs to the end of its sentence;
2. a context trigger is a phrase such as "when we talk about X", "next time X comes up"
   or "if I mention X": X is the cue;
3. otherwise a time trigger is the longest run of words at the start or at the end of the
   request that `dateparser` reads as a date, relative to the turn's time in the user's time
   zone (future dates preferred: "on Friday" is the coming Friday). A time without a clock
   time ("tomorrow", "on Friday", "in 3 days") is due from the start of that day;
4. the rest, without its leading "to"/"about"/"that", is what to remind the user of.

English phrasing only; dates themselves are read by dateparser's English data.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, time, tzinfo

import dateparser

from service.core import safety
from service.core.reminders import TriggerKind, resolve_zone

MAX_REQUEST_WORDS = 60
"""Longest request read; a longer sentence is cut (requests are short)."""
MAX_TIME_WORDS = 8
"""Longest time expression tried ("next Monday at 10:00 in the morning" is 7 words)."""
MAX_CONTENT_CHARS = 500
"""Longest text of a reminder."""
LEAD_WINDOW_CHARS = 80
"""Characters before "remind me" looked at to tell a request ("Could you please…") apart."""

_START = re.compile(r"\b(?:remind me|set (?:me )?an? reminder(?: for me)?)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[!?\n]|\.(?=\s|$)")
# What may stand before "remind me" in its sentence for it to be a request: nothing, a
# polite "can you"/"please", or words ending in a comma ("Oh, remind me…"); so "you remind me
# of" or "it would remind me too much" are not.
_REQUEST_LEAD = re.compile(
    r"(?:^|,|\b(?:can|could|will|would)\s+you(?:\s+please)?|\bplease|\bpls|\bjust)\W*$",
    re.IGNORECASE,
)
# "remind me what her name was", "remind me of…", "remind me again", "remind me about X"
# (with no time or topic): questions, not requests
_NOT_A_REQUEST = re.compile(
    r"^(?:what|who|whom|whose|how|where|why|which|whether|of|again|that|about)\b", re.IGNORECASE
)
_RECURRING = re.compile(
    r"\b(?:every(?:\s+other)?\s+(?:day|morning|evening|night|week|weekday|month|year|hour"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d+)|daily|weekly|monthly"
    r"|each\s+(?:day|morning|evening|week|month))\b",
    re.IGNORECASE,
)
_POLITE_END = re.compile(r"[\s,]*\b(?:please|pls|thanks|thank you)\W*$", re.IGNORECASE)
_CONNECTOR = re.compile(r"^(?:,\s*)?(?:to|about|that|of)\s+", re.IGNORECASE)

_CUE_LEAD = r"(?:when(?:ever)?|(?:the\s+)?next\s+time|if|once|as\s+soon\s+as)"
_SPEAKING = (
    r"(?:we|i|you)\s+(?:next\s+)?(?:talk|speak|chat|are\s+talking|discuss|mention"
    r"|bring\s+up|get\s+to)(?:\s+(?:about|of|on))?"
)
_CUE_SPOKEN = re.compile(rf"\b{_CUE_LEAD}\s+{_SPEAKING}\s+(?P<cue>.+)$", re.IGNORECASE)
_CUE_COMES_UP = re.compile(
    rf"\b{_CUE_LEAD}\s+(?P<cue>.+?)\s+(?:comes?\s+up|(?:is|are|gets?)\s+(?:mentioned|brought\s+up"
    rf"|discussed))\b(?P<tail>.*)$",
    re.IGNORECASE,
)
_CUE_SPLIT = re.compile(r",\s*|\s+(?:to|about|that)\s+", re.IGNORECASE)

# Words a time expression may start with; a run starting elsewhere ("the vet on Friday") is
# never taken for a time, whatever dateparser would make of it.
_TIME_START = re.compile(
    r"^(?:on|at|in|by|before|next|this|last|tomorrow|today|tonight|yesterday|noon|midnight|\d"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|january|february|march|april|may|june|july|august|september|october|november|december"
    r"|mon|tue|tues|thu|thur|thurs|fri|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\b",
    re.IGNORECASE,
)
_LEAD_ONLY_START = re.compile(r"^for\b", re.IGNORECASE)
# dateparser skips words it does not know ("next week about the" reads as next week), so a
# run holding or ending in these is never a time expression.
_NOT_IN_TIME = re.compile(r"\b(?:to|about|that|and|my|with|me)\b", re.IGNORECASE)
_NOT_LAST_IN_TIME = re.compile(r"^(?:the|a|an|of|for|on|at|in|by|this|next)$", re.IGNORECASE)
_BARE_HOUR = re.compile(r"\bat (\d{1,2})\b(?![:.]\d|\s*(?:am|pm|h\b|o'?clock))", re.IGNORECASE)
_OCLOCK = re.compile(r"\b(\d{1,2})\s*o'?clock\b", re.IGNORECASE)
_DOTTED_MERIDIEM = re.compile(r"\b([ap])\.m\.", re.IGNORECASE)
# A clock time was said (else the reminder is for the whole day).
_CLOCK = re.compile(
    r"\d\s*[:.h]\s*\d{2}|\d\s*(?:am|pm)\b|\b(?:noon|midnight|morning|afternoon|evening|tonight"
    r"|night|hours?|hrs?|minutes?|mins?|seconds?|secs?)\b",
    re.IGNORECASE,
)


class Problem:
    """Why a request cannot be set, as a sentence for the user (also shown to the model)."""

    NO_TRIGGER = (
        "I could not tell when to remind you: give a time (“on Friday at 9”, "
        "“in 2 hours”) or a topic (“when we talk about the garden”)"
    )
    NO_CONTENT = "I could not tell what to remind you of"
    PAST = "that time has already passed"
    RECURRING = "repeating reminders are not supported yet; ask for one time"
    INSTRUCTION = "a reminder holds something to tell you, not instructions to the assistant"


@dataclass(frozen=True, slots=True)
class Trigger:
    """When a reminder is due."""

    kind: TriggerKind  #: time or context
    due_at: datetime | None = None  #: time trigger: the moment, UTC (the day's start if all_day)
    all_day: bool = False  #: time trigger: only a day was given, no clock time
    cue: str | None = None  #: context trigger: the topic, as the user wrote it


@dataclass(frozen=True, slots=True)
class ReminderRequest:
    """A reminder request found in a message."""

    text: str  #: the request as typed, from "remind me" to the end of its sentence
    content: str  #: what to remind the user of; "" when it could not be read
    trigger: Trigger | None  #: None when no time or topic could be read
    problem: str | None  #: None when the reminder can be set, else a sentence (`Problem`)


def mentions_request(message: str) -> bool:
    """Cheap test: could `message` hold a reminder request at all?"""
    return _START.search(message) is not None


def find_request(message: str, *, now: datetime, zone_name: str | None) -> ReminderRequest | None:
    """Read the first reminder request of `message`.

    Args:
        message: the user's message.
        now: the turn's time (tz-aware); relative times count from it.
        zone_name: the user's IANA time zone; None or unknown = UTC.

    Returns:
        None when the message asks for no reminder ("remind me what her name was" is a
        question, not a request); else the request, with `problem` set when it cannot be
        set as asked (no time or topic, a past time, a repeating time, no text).
    """
    start = next(
        (
            m
            for m in itertools.islice(_START.finditer(message), 10)
            if _is_request_lead(message, m.start())
        ),
        None,
    )
    if start is None:
        return None
    tail = message[start.end() :]
    tail = _DOTTED_MERIDIEM.sub(r"\1m", tail)
    end = _SENTENCE_END.search(tail)
    rest = " ".join(tail[: end.start() if end else len(tail)].split()[:MAX_REQUEST_WORDS])
    rest = _POLITE_END.sub("", rest).strip(" ,:;-")
    typed = " ".join((message[start.start() : start.end()] + " " + rest).split())
    if not rest:
        return None
    if _RECURRING.search(rest):
        return ReminderRequest(typed, "", None, Problem.RECURRING)
    found = _context_trigger(rest)
    if found is None:
        zone, name = resolve_zone(zone_name)
        found = _time_trigger(rest, now=now, zone=zone, zone_name=name)
    if found is None:
        if _NOT_A_REQUEST.match(rest):
            return None
        return ReminderRequest(typed, _content(rest), None, Problem.NO_TRIGGER)
    trigger, content = found
    problem = None
    if not content:
        problem = Problem.NO_CONTENT
    elif safety.looks_like_instruction(content):
        problem = Problem.INSTRUCTION
    elif trigger.kind is TriggerKind.TIME and _is_past(trigger, now=now, zone_name=zone_name):
        problem = Problem.PAST
    return ReminderRequest(typed, content, trigger, problem)


def _is_request_lead(message: str, at: int) -> bool:
    """True when the words before `at` in its sentence leave "remind me" a request."""
    before = message[max(0, at - LEAD_WINDOW_CHARS) : at]  # bounded: a message may be long
    sentence = max(before.rfind(c) for c in ".!?\n")
    return _REQUEST_LEAD.search(before[sentence + 1 :].strip()) is not None


def _content(text: str) -> str:
    text = _CONNECTOR.sub("", text.strip(" ,;:-")).strip(" ,;:-")
    return unicodedata.normalize("NFC", text)[:MAX_CONTENT_CHARS]


def _context_trigger(rest: str) -> tuple[Trigger, str] | None:
    spoken = _CUE_SPOKEN.search(rest)
    if spoken is not None:
        cue, after = _split_cue(spoken.group("cue"))
        before = rest[: spoken.start()]
    else:
        comes_up = _CUE_COMES_UP.search(rest)
        if comes_up is None:
            return None
        cue, after = comes_up.group("cue"), comes_up.group("tail")
        before = rest[: comes_up.start()]
    cue = cue.strip(" ,;:-\"'“”")
    if not cue:
        return None
    content = _content(before) or _content(after)
    return Trigger(TriggerKind.CONTEXT, cue=unicodedata.normalize("NFC", cue)), content


def _split_cue(text: str) -> tuple[str, str]:
    """Place and task: "the garden to buy seeds" → ("the garden", "buy seeds"); "," beats "to"."""
    comma = text.find(",")
    if comma >= 0:
        return text[:comma], text[comma + 1 :]
    split = _CUE_SPLIT.search(text)
    if split is None:
        return text, ""
    return text[: split.start()], text[split.end() :]


def _time_trigger(
    rest: str, *, now: datetime, zone: tzinfo, zone_name: str
) -> tuple[Trigger, str] | None:
    words = _normalized(rest).split()
    base = now.astimezone(zone).replace(tzinfo=None)
    lead = _leading(words, base=base, zone_name=zone_name)
    trail = _trailing(words[lead:], base=base, zone_name=zone_name)
    if lead and trail:  # "tomorrow to call mum at 9:00": one time in two parts
        time_words = words[:lead] + words[len(words) - trail :]
        if _parse(_time_words(time_words), base=base, zone_name=zone_name) is None:
            trail = 0
    elif not lead and not trail:
        return None
    time_words = words[:lead] + words[len(words) - trail :]
    when = _parse(_time_words(time_words), base=base, zone_name=zone_name)
    assert when is not None
    content = _content(" ".join(words[lead : len(words) - trail]))
    return _trigger(when, " ".join(time_words), zone=zone), content


def _leading(words: list[str], *, base: datetime, zone_name: str) -> int:
    """Length of the longest time expression starting `words` (0: none)."""
    if not words or not (_TIME_START.match(words[0]) or _LEAD_ONLY_START.match(words[0])):
        return 0
    for size in range(min(MAX_TIME_WORDS, len(words)), 0, -1):
        if _parse(_time_words(words[:size]), base=base, zone_name=zone_name) is not None:
            return size
    return 0


def _trailing(words: list[str], *, base: datetime, zone_name: str) -> int:
    """Length of the longest time expression ending `words` (0: none)."""
    for size in range(min(MAX_TIME_WORDS, len(words)), 0, -1):
        if not _TIME_START.match(words[len(words) - size]):
            continue
        if _parse(_time_words(words[len(words) - size :]), base=base, zone_name=zone_name):
            return size
    return 0


def _normalized(text: str) -> str:
    """Times dateparser misreads, written the way it reads them ("at 9" → "at 9:00")."""
    text = _OCLOCK.sub(r"\1:00", text)
    return _BARE_HOUR.sub(r"at \1:00", text)


def _time_words(words: list[str]) -> str:
    text = " ".join(w.strip(",;") for w in words)
    return re.sub(r"^for\s+", "", text, flags=re.IGNORECASE)


def _parse(text: str, *, base: datetime, zone_name: str) -> datetime | None:
    """The dateparser reading of `text` as local wall time in the user's zone, or None."""
    if not text or _NOT_IN_TIME.search(text) or _NOT_LAST_IN_TIME.match(text.split()[-1]):
        return None
    try:
        found: datetime | None = dateparser.parse(
            text,
            languages=["en"],
            settings={
                "RELATIVE_BASE": base,
                "PREFER_DATES_FROM": "future",
                "TIMEZONE": zone_name,
                "RETURN_AS_TIMEZONE_AWARE": False,
                "STRICT_PARSING": False,
            },
        )
    except Exception:  # dateparser raises assorted errors on odd input; odd input is no date
        return None
    return found


def _trigger(local: datetime, time_text: str, *, zone: tzinfo) -> Trigger:
    if _CLOCK.search(time_text):
        return Trigger(TriggerKind.TIME, due_at=local.replace(tzinfo=zone).astimezone(UTC))
    start_of_day = datetime.combine(local.date(), time(0), tzinfo=zone)
    return Trigger(TriggerKind.TIME, due_at=start_of_day.astimezone(UTC), all_day=True)


def _is_past(trigger: Trigger, *, now: datetime, zone_name: str | None) -> bool:
    assert trigger.due_at is not None
    if trigger.all_day:
        zone, _ = resolve_zone(zone_name)
        return trigger.due_at.astimezone(zone).date() < now.astimezone(zone).date()
    return trigger.due_at <= now
