"""Pure parsing of what an import reads: pasted lines and the JSON export."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.core.imports import parse_export, split_facts
from service.core.records import Bank, SourceKind


def test_one_fact_a_line_drops_bullets_numbers_blanks_and_repeats() -> None:
    pasted = (
        "- I keep bees\n* My sister is Ana\n• I cycle to work\n1. I am vegetarian\n"
        "2) I live in Lyon\n\n   \nI keep bees.\n- i KEEP bees\n12 monkeys is my favourite film\n"
        "-3 degrees is too cold for me"
    )
    assert split_facts(pasted) == [
        "I keep bees",
        "My sister is Ana",
        "I cycle to work",
        "I am vegetarian",
        "I live in Lyon",
        "12 monkeys is my favourite film",
        "-3 degrees is too cold for me",
    ]


def test_an_export_keeps_active_memories_and_counts_the_rest() -> None:
    at = "2025-01-02T03:04:05+00:00"
    data = [
        {"bank": "personal", "content": "A", "created_at": at, "status": "active", "id": "x"},
        {"bank": "personal", "content": "B", "created_at": at, "status": "superseded"},
        {"bank": "personal", "content": "C", "created_at": at, "status": "archived"},
        {"bank": "chat", "content": "D", "created_at": at},
        {"bank": "project", "content": "E", "created_at": "2025-01-02T03:04:05", "folder_id": "f"},
    ]
    parsed = parse_export({"memories": data})
    assert (len(parsed.items), parsed.history, parsed.unsupported) == (2, 2, 1)
    first, second = parsed.items
    assert (first.bank, first.source_kind, first.updated_at) == (
        Bank.PERSONAL,
        SourceKind.MANUAL,
        datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    assert (second.bank, second.folder_id, second.created_at.tzinfo) == (Bank.PROJECT, "f", UTC)


@pytest.mark.parametrize(
    ("data", "sentence"),
    [
        ({"a": 1}, "the file is not a memory export: expected a JSON list of memories"),
        ([{"bank": "personal"}], "memory 1 of the file: content: Field required"),
        (
            [{"bank": "personal", "content": "x", "created_at": "yesterday"}],
            "memory 1 of the file: created_at: Input should be a valid datetime or date, "
            "input is too short",
        ),
        (
            [{"bank": "personal", "content": "x", "created_at": "2025-01-01", "confidence": 3}],
            "memory 1 of the file: confidence: Input should be less than or equal to 1",
        ),
    ],
)
def test_a_bad_export_is_refused_with_a_sentence(data: object, sentence: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_export(data)
    assert str(caught.value) == sentence


def test_help_lists_every_command_and_the_import_and_export_forms() -> None:
    from service.core.commands import HELP_TEXT, CommandName

    missing = [name.value for name in CommandName if f"`/memory {name.value}" not in HELP_TEXT]
    assert missing == []
    for form in ("/memory export markdown", "/memory import`", "/memory import openwebui"):
        assert form in HELP_TEXT
