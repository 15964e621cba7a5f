"""Banks are described once, in core/banks.py (issue 29 item 10): every `Bank` member has a
row, and the labels, the names users type, the extraction prompt, the privacy table, the
default bank and the refusals all follow a changed row."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from service.core import banks, extraction, privacy
from service.core.records import Bank, ChatContext, ChatKind, OwnerKind

PRIVATE = ChatContext(user_id="u1", kind=ChatKind.SAVED, chat_id="c1", folder_id="f1")
SHARED = dataclasses.replace(PRIVATE, collaborative=True)


def _missing(table: tuple[banks.BankSpec, ...]) -> list[str]:
    """Members of `Bank` without exactly one row."""
    return [b.value for b in Bank if sum(r.bank is b for r in table) != 1]


def test_every_bank_has_exactly_one_row() -> None:
    assert _missing(banks.TABLE) == []
    assert len(banks.TABLE) == len(Bank)


def test_a_bank_without_a_row_is_reported_and_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # what a new member of `Bank` without its row looks like
    monkeypatch.setattr(banks, "TABLE", tuple(r for r in banks.TABLE if r.bank is not Bank.CHAT))
    assert _missing(banks.TABLE) == ["chat"]
    with pytest.raises(LookupError, match=r"'chat' has no row in service/core/banks\.py"):
        _ = Bank.CHAT.label


def _system_prompt() -> str:
    messages = extraction.build_messages(
        turns=[extraction.TurnText(user_message="hi", assistant_message=None, history=())],
        user_name=None,
        now=datetime(2026, 1, 1, tzinfo=UTC),
        neighbours=[],
        allowed_banks=[Bank.PERSONAL],
    )
    return " ".join(messages[0]["content"].split())


def test_the_prompt_names_every_bank_with_its_row_text() -> None:
    prompt = _system_prompt()
    for row in banks.TABLE:
        assert " ".join(f'"{row.bank.value}" ({row.prompt})'.split()) in prompt


def _changed(bank: Bank, **fields: Any) -> tuple[banks.BankSpec, ...]:
    return tuple(dataclasses.replace(r, **fields) if r.bank is bank else r for r in banks.TABLE)


def test_labels_names_and_the_prompt_follow_a_changed_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        banks,
        "TABLE",
        _changed(
            Bank.PROJECT,
            label="Team Memory",
            prompt="facts about the team's work",
            aliases=("team",),
        ),
    )
    assert Bank.PROJECT.label == "Team Memory"
    assert Bank.parse("team") is Bank.PROJECT
    assert Bank.parse("team memory") is Bank.PROJECT
    assert '"project" (facts about the team\'s work)' in _system_prompt()
    no_folder = dataclasses.replace(PRIVATE, folder_id=None)
    assert privacy.command_refusal(no_folder, Bank.PROJECT) == (
        "Team Memory belongs to a folder; this chat is not in one"
    )


def test_privacy_follows_a_changed_privacy_class(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Bank.INTERACTION in privacy.read_scope(SHARED).banks
    monkeypatch.setattr(banks, "TABLE", _changed(Bank.INTERACTION, private=True))
    assert Bank.INTERACTION not in privacy.read_scope(SHARED).banks
    assert Bank.INTERACTION not in privacy.write_scope(SHARED).owners
    assert Bank.INTERACTION in privacy.read_scope(PRIVATE).banks


def test_chat_kinds_of_a_row_decide_where_its_cell_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channel = dataclasses.replace(SHARED, kind=ChatKind.CHANNEL)
    assert Bank.CHAT in privacy.read_scope(channel).banks
    monkeypatch.setattr(banks, "TABLE", _changed(Bank.CHAT, chat_kinds=frozenset({ChatKind.SAVED})))
    assert Bank.CHAT not in privacy.read_scope(channel).banks
    assert Bank.CHAT in privacy.read_scope(SHARED).banks


def test_the_default_bank_follows_the_table_order(monkeypatch: pytest.MonkeyPatch) -> None:
    writable = privacy.command_write_scope(PRIVATE)
    assert privacy.default_bank(PRIVATE, writable) is Bank.PERSONAL
    assert privacy.default_bank(SHARED, privacy.command_write_scope(SHARED)) is Bank.INTERACTION
    monkeypatch.setattr(banks, "TABLE", _changed(Bank.INTERACTION, default_rank=0))
    assert privacy.default_bank(PRIVATE, writable) is Bank.INTERACTION


def test_an_owners_cells_and_the_users_cells_come_from_the_table() -> None:
    assert [c.bank for c in banks.owner_cells(OwnerKind.USER, "u1")] == [
        Bank.PERSONAL,
        Bank.INTERACTION,
    ]
    cells = banks.user_cells("u1", folder_id="f1", assistant_id="helper")
    # Chat Memory lives in its chat: never a cell of the user outside it
    assert [c.bank for c in cells] == [
        Bank.PERSONAL,
        Bank.INTERACTION,
        Bank.PROJECT,
        Bank.ASSISTANT,
    ]
    assert banks.owner_ids(cells[2]) == ("f1", None)
    assert banks.owner_ids(cells[3]) == (None, "helper")
    with pytest.raises(ValueError, match="Chat Memory is added from inside its chat"):
        banks.outside_chat_cell(Bank.CHAT, user_id="u1", folder_id=None, assistant_id=None)
