"""One set of input limits, shared by every writer (issue 13; DESIGN §5).

The API schemas, `/memory` commands, extraction and the summarizers all read these numbers,
so a fact too long for one writer is too long for all of them. The values are ours: a fact
is one short sentence (2,000 characters leaves room for a paragraph a user writes by hand);
a message is what a chat turn carries (32,000 characters, about 8,000 tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, Protocol, TypeVar

from service.errors import InvalidInput

MAX_FACT_CHARS = 2_000
"""Characters of one memory's text (hand-written, extracted or summarized)."""
MAX_TAGS = 10
"""Tags of one memory."""
MAX_TAG_CHARS = 32
"""Characters of one tag."""
MAX_OPERATIONS = 30
"""Operations of one extraction answer that are applied; the rest are dropped and logged
(the per-user cap is 200 memories; one message never holds 30 lasting facts)."""
MAX_ANSWER_ITEMS = 4 * MAX_OPERATIONS
"""Items of an extraction answer's operations list that are validated at all (issue 26): the
first 120 leave room for malformed or refused items before the cap of MAX_OPERATIONS; the
rest are counted as dropped and never looked at."""
MAX_ANSWER_CHARS = 256 * 1024
"""Characters of an LLM answer json-repair may work on (issue 26): MAX_OPERATIONS operations of
MAX_FACT_CHARS characters are about 64 KiB of JSON, so four times that is room to spare. A
longer answer is decoded only by the standard library's JSON parser (C, linear time), never
by json-repair (pure Python), so a 20,000-operation answer cannot hold a worker for long."""
MAX_MESSAGE_CHARS = 32_000
"""Characters of one chat message the API accepts (user, assistant or history)."""
MAX_COMMAND_CHARS = MAX_FACT_CHARS + 100
"""Characters of one `/memory` command: a fact and its verb, bank or id."""

EARLIEST_DATE = datetime(1970, 1, 1, tzinfo=UTC)
"""No date before this is accepted (nothing of a chat happened before 1970)."""
YEARS_AHEAD = 10
"""How far ahead of now a date may be (a reminder years away; clocks that are off)."""


def latest_date(now: datetime) -> datetime:
    """The latest date accepted at `now` (aware, UTC): now + 10 years (of 366 days)."""
    return now.astimezone(UTC) + timedelta(days=366 * YEARS_AHEAD)


def check_date(value: datetime, *, now: datetime) -> datetime:
    """`value` as an aware datetime (its own offset kept), when it lies in
    [1970-01-01, now + 10 years]. A naive `value` is read as UTC.

    Raises:
        ValueError: with a sentence naming the range, outside it.
    """
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    latest = latest_date(now)
    if not EARLIEST_DATE <= aware <= latest:
        raise ValueError(f"must be a date between 1970-01-01 and {latest:%Y-%m-%d} (UTC)")
    return aware


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters (the end marked by "…")."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _check_chars(text: str, *, limit: int, holder: str) -> str:
    if len(text) > limit:
        raise InvalidInput(f"{holder} holds at most {limit} characters; this one has {len(text)}")
    return text


def check_fact(text: str) -> str:
    """`text` when it fits in a memory.

    Raises:
        InvalidInput: more than MAX_FACT_CHARS characters, with a sentence giving both.
    """
    return _check_chars(text, limit=MAX_FACT_CHARS, holder="a memory")


def check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """`tags` when there are at most MAX_TAGS of at most MAX_TAG_CHARS characters each.

    Raises:
        InvalidInput: too many tags, or a tag too long, with a sentence.
    """
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"a memory has at most {MAX_TAGS} tags; {len(tags)} were given")
    for tag in tags:
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(f"a tag has at most {MAX_TAG_CHARS} characters")
    return tuple(tags)


def check_command(text: str) -> str:
    """`text` when it is short enough for a `/memory` command.

    Raises:
        InvalidInput: more than MAX_COMMAND_CHARS characters, with a sentence giving both.
    """
    return _check_chars(text, limit=MAX_COMMAND_CHARS, holder="a command")


class _HasContent(Protocol):
    @property
    def content(self) -> str: ...


_Op = TypeVar("_Op", bound=_HasContent)


@dataclass(frozen=True, slots=True)
class CappedOperations(Generic[_Op]):
    """An LLM answer's operations within the limits, and how many were dropped."""

    kept: list[_Op]  #: in the answer's order
    too_long: int  #: dropped: text over MAX_FACT_CHARS
    past_cap: int  #: dropped: after the first MAX_OPERATIONS


def cap_operations(operations: Sequence[_Op]) -> CappedOperations[_Op]:
    """The first MAX_OPERATIONS operations whose text fits in a memory."""
    fitting = [op for op in operations if len(op.content) <= MAX_FACT_CHARS]
    return CappedOperations(
        kept=fitting[:MAX_OPERATIONS],
        too_long=len(operations) - len(fitting),
        past_cap=max(len(fitting) - MAX_OPERATIONS, 0),
    )
