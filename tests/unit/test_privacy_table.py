"""Every cell of DESIGN §3's privacy table, on core/privacy directly: for each kind of chat,
which bank of which owner it may read (inject) and write (extract into).

R = read, W = write; "-" = neither. Owners: the sender "ana" (Personal, Interaction
Patterns), the chat's folder "f1" (Project Memory), the chat itself "c1" (Chat Memory).
"""

from __future__ import annotations

import pytest

from service.core import privacy
from service.core.records import Bank, ChatContext, ChatKind, OwnerKind, Scope

P, IP, PM, CM = Bank.PERSONAL, Bank.INTERACTION, Bank.PROJECT, Bank.CHAT
OWNER = {
    P: Scope(OwnerKind.USER, "ana", P),
    IP: Scope(OwnerKind.USER, "ana", IP),
    PM: Scope(OwnerKind.FOLDER, "f1", PM),
    CM: Scope(OwnerKind.CHAT, "c1", CM),
}


def _chat(kind: ChatKind, **extra: object) -> ChatContext:
    return ChatContext(user_id="ana", kind=kind, chat_id="c1", **extra)  # type: ignore[arg-type]


TABLE: list[tuple[str, ChatContext, dict[Bank, str]]] = [
    # private saved chat: read, write everything it has (Project Memory if in a folder)
    (
        "private chat in a folder",
        _chat(ChatKind.SAVED, folder_id="f1"),
        {P: "RW", IP: "RW", PM: "RW", CM: "RW"},
    ),
    ("private chat, no folder", _chat(ChatKind.SAVED), {P: "RW", IP: "RW", PM: "-", CM: "RW"}),
    # collaborative chat (shared folder, shared chat, channel): Personal never read or written
    (
        "shared chat in a shared folder",
        _chat(ChatKind.SAVED, folder_id="f1", collaborative=True),
        {P: "-", IP: "RW", PM: "RW", CM: "RW"},
    ),
    (
        "shared chat, no folder",
        _chat(ChatKind.SAVED, collaborative=True),
        {P: "-", IP: "RW", PM: "-", CM: "RW"},
    ),
    ("channel", _chat(ChatKind.CHANNEL, collaborative=True), {P: "-", IP: "RW", PM: "-", CM: "RW"}),
    # temporary chat: read only if the user allows it (default yes); never written
    (
        "temporary chat, reading allowed",
        _chat(ChatKind.TEMPORARY, folder_id="f1"),
        {P: "R", IP: "R", PM: "R", CM: "-"},
    ),
    (
        "temporary chat, reading refused",
        _chat(ChatKind.TEMPORARY, folder_id="f1", read_in_temporary=False),
        {P: "-", IP: "-", PM: "-", CM: "-"},
    ),
    # API call without chat, background task, automation: nothing
    ("API call", _chat(ChatKind.API, folder_id="f1"), {P: "-", IP: "-", PM: "-", CM: "-"}),
    ("background task", _chat(ChatKind.TASK, folder_id="f1"), {P: "-", IP: "-", PM: "-", CM: "-"}),
    ("automation", _chat(ChatKind.AUTOMATED, folder_id="f1"), {P: "-", IP: "-", PM: "-", CM: "-"}),
    # no sender: nobody to read or write for
    (
        "saved chat without a sender",
        ChatContext(user_id="", kind=ChatKind.SAVED, chat_id="c1", folder_id="f1"),
        {P: "-", IP: "-", PM: "-", CM: "-"},
    ),
]


@pytest.mark.parametrize(("name", "chat", "cells"), TABLE, ids=[row[0] for row in TABLE])
def test_each_chat_kind_reads_and_writes_exactly_its_cells_of_the_table(
    name: str, chat: ChatContext, cells: dict[Bank, str]
) -> None:
    read = privacy.read_scope(chat)
    write = privacy.write_scope(chat)
    assert sorted(read.scopes, key=str) == sorted(
        (OWNER[b] for b, rw in cells.items() if "R" in rw), key=str
    )
    assert write.owners == {b: OWNER[b] for b, rw in cells.items() if "W" in rw}


def test_the_table_covers_every_chat_kind_and_bank() -> None:
    assert {row[1].kind for row in TABLE} == set(ChatKind)
    assert all(set(cells) == set(Bank) for _, _, cells in TABLE)


def test_a_collaborative_chat_never_reaches_the_senders_or_the_owners_personal_bank() -> None:
    for kind in (ChatKind.SAVED, ChatKind.CHANNEL):
        chat = _chat(kind, folder_id="f1", collaborative=True)
        assert P not in privacy.read_scope(chat).banks
        assert privacy.write_scope(chat).scope_for(P) is None
