"""Which remembered events are over: a memory about an appointment or a plan whose date has
passed says so when it is injected ("dentist on 2026-03-11" read on 2026-03-20), so the
model does not offer it as coming up (pure).

A memory is a past event when the latest date written in it is before the user's today and
not before the day the memory was stated: it was ahead (or that very day) when the user
spoke of it. A date before the day it was stated (a birth date, a wedding years ago) was
never upcoming and is left as it is. Only absolute dates with a year are read — ISO
`2026-03-11`, `March 11, 2026`, `11 March 2026` — the forms extraction writes, since its
prompt replaces relative dates with absolute ones (service/core/extraction.py).
"""

from __future__ import annotations

import re
from datetime import date

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ISO = re.compile(r"(?<![\d-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\d-])")
_MONTH_FIRST = re.compile(
    rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.IGNORECASE
)
_DAY_FIRST = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})\b", re.IGNORECASE
)


def dates_in(text: str) -> list[date]:
    """The valid calendar dates written in `text` with a year, in the order found."""
    found: list[tuple[int, date]] = []
    for pattern, order in ((_ISO, "ymd"), (_MONTH_FIRST, "mdy"), (_DAY_FIRST, "dmy")):
        for match in pattern.finditer(text):
            parts = dict(zip(order, match.groups(), strict=True))
            month = parts["m"]
            number = int(month) if month.isdigit() else _MONTHS[month.lower()]
            try:
                found.append((match.start(), date(int(parts["y"]), number, int(parts["d"]))))
            except ValueError:  # 2026-02-30 is no date
                continue
    return [day for _, day in sorted(found)]


def passed_on(content: str, *, stated_on: date, today: date) -> date | None:
    """The date that makes the memory a past event, or None (see the module docstring).

    Args:
        content: the memory's text.
        stated_on: the day the memory was stated (its `created_at`, in the user's zone).
        today: the user's current date (the turn's time in their zone).
    """
    found = dates_in(content)
    if not found:
        return None
    latest = max(found)
    return latest if stated_on <= latest < today else None


def past_mark(content: str, *, stated_on: date, today: date) -> str:
    """A note for a past event, " (past: 2026-03-11 is before today, 2026-03-20)", else ""."""
    day = passed_on(content, stated_on=stated_on, today=today)
    return f" (past: {day:%Y-%m-%d} is before today, {today:%Y-%m-%d})" if day else ""
