"""Every count the service and the filter files show is phrased by one helper per file, so a
single item is never "1 memories" (issue 30 item 3)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.core.commands import counted
from testkit.filter_loader import load_filter

ROOT = Path(__file__).resolve().parents[2]
#: a `{…}` placeholder right before a plural noun, as an f-string writes a count by hand
HAND_WRITTEN_COUNT = re.compile(
    r"\{([^{}]*)\} (memories|turns|reminders|messages|summaries|owners|facts|items)\b"
)
#: placeholders before a plural noun that are no counts (a bank's label, a chat kind), or a
#: count that is always more than one (the import limit; the `reminders:` branch for several)
NOT_A_COUNT = {"bank.label", "banks", "chat.kind.value", "MAX_IMPORT_ITEMS", "len(due)"}


@pytest.mark.parametrize(
    ("count", "phrase"),
    [(0, "0 memories"), (1, "1 memory"), (2, "2 memories"), (21, "21 memories")],
)
def test_counted_phrases_one_and_many(count: int, phrase: str) -> None:
    assert counted(count, "memory", "memories") == phrase
    assert load_filter().counted(count, "memory", "memories") == phrase


def test_no_answer_writes_a_count_before_a_plural_noun_by_hand() -> None:
    found = []
    for path in sorted(
        [*ROOT.joinpath("service").rglob("*.py"), *ROOT.joinpath("filter").glob("*.py")]
    ):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in HAND_WRITTEN_COUNT.finditer(line):
                if match.group(1).strip() not in NOT_A_COUNT:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_the_filter_says_recalled_1_memory() -> None:
    module = load_filter()
    assert [module._recalled_status(n) for n in (0, 1, 3)] == [
        "Recalled what I know about you",
        "Recalled 1 memory",
        "Recalled 3 memories",
    ]
