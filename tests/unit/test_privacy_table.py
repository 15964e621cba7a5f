"""Every cell of DESIGN §3's privacy table, on core/privacy directly: for each kind of chat,
which bank of which owner it may read (inject) and write (extract into).

R = read, W = write; "-" = neither. Owners: the sender "ana" (Personal, Interaction
Patterns), the chat's folder "f1" (Project Memory), the chat itself "c1" (Chat Memory),
and ana's memory for the assistant "coder" (Assistant Memory) — the row DESIGN §3 describes
in prose: a chat with an assistant that has its own memory reads and writes that and
nothing else.
"""

from __future__ import annotations

import pytest

from service.core import assistants, privacy
from service.core.records import Bank, ChatContext, ChatKind, OwnerKind, Scope

P, IP, PM, CM, AM = Bank.PERSONAL, Bank.INTERACTION, Bank.PROJECT, Bank.CHAT, Bank.ASSISTANT
OWNER = {
    P: Scope(OwnerKind.USER, "ana", P),
    IP: Scope(OwnerKind.USER, "ana", IP),
    PM: Scope(OwnerKind.FOLDER, "f1", PM),
    CM: Scope(OwnerKind.CHAT, "c1", CM),
    AM: Scope(OwnerKind.ASSISTANT, '["ana","coder"]', AM),
}


def _chat(kind: ChatKind, **extra: object) -> ChatContext:
    return ChatContext(user_id="ana", kind=kind, chat_id="c1", **extra)  # type: ignore[arg-type]


TABLE: list[tuple[str, ChatContext, dict[Bank, str]]] = [
    # private saved chat: read, write everything it has (Project Memory if in a folder)
    (
        "private chat in a folder",
        _chat(ChatKind.SAVED, folder_id="f1"),
        {P: "RW", IP: "RW", PM: "RW", CM: "RW", AM: "-"},
    ),
    (
        "private chat, no folder",
        _chat(ChatKind.SAVED),
        {P: "RW", IP: "RW", PM: "-", CM: "RW", AM: "-"},
    ),
    # collaborative chat (shared folder, shared chat, channel): Personal never read or written
    (
        "shared chat in a shared folder",
        _chat(ChatKind.SAVED, folder_id="f1", collaborative=True),
        {P: "-", IP: "RW", PM: "RW", CM: "RW", AM: "-"},
    ),
    (
        "shared chat, no folder",
        _chat(ChatKind.SAVED, collaborative=True),
        {P: "-", IP: "RW", PM: "-", CM: "RW", AM: "-"},
    ),
    (
        "channel",
        _chat(ChatKind.CHANNEL, collaborative=True),
        {P: "-", IP: "RW", PM: "-", CM: "RW", AM: "-"},
    ),
    # temporary chat: read only if the user allows it (default yes); never written
    (
        "temporary chat, reading allowed",
        _chat(ChatKind.TEMPORARY, folder_id="f1"),
        {P: "R", IP: "R", PM: "R", CM: "-", AM: "-"},
    ),
    (
        "temporary chat, reading refused",
        _chat(ChatKind.TEMPORARY, folder_id="f1", read_in_temporary=False),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
    ),
    # API call without chat, background task, automation: nothing
    ("API call", _chat(ChatKind.API, folder_id="f1"), {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"}),
    (
        "background task",
        _chat(ChatKind.TASK, folder_id="f1"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
    ),
    (
        "automation",
        _chat(ChatKind.AUTOMATED, folder_id="f1"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
    ),
    # a chat with an assistant that has its own memory: that memory only, and like
    # Personal never in a chat others see; temporary chats read it, never write it
    (
        "assistant chat in a folder",
        _chat(ChatKind.SAVED, folder_id="f1", assistant_id="coder"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "RW"},
    ),
    (
        "shared assistant chat",
        _chat(ChatKind.SAVED, folder_id="f1", collaborative=True, assistant_id="coder"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
    ),
    (
        "assistant in a channel",
        _chat(ChatKind.CHANNEL, collaborative=True, assistant_id="coder"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
    ),
    (
        "temporary assistant chat, reading allowed",
        _chat(ChatKind.TEMPORARY, folder_id="f1", assistant_id="coder"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "R"},
    ),
    (
        "temporary assistant chat, reading refused",
        _chat(ChatKind.TEMPORARY, read_in_temporary=False, assistant_id="coder"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
    ),
    (
        "API call to an assistant",
        _chat(ChatKind.API, assistant_id="coder"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
    ),
    (
        "background task of an assistant chat",
        _chat(ChatKind.TASK, assistant_id="coder"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
    ),
    (
        "automation with an assistant",
        _chat(ChatKind.AUTOMATED, assistant_id="coder"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
    ),
    # no sender: nobody to read or write for
    (
        "saved chat without a sender",
        ChatContext(user_id="", kind=ChatKind.SAVED, chat_id="c1", folder_id="f1"),
        {P: "-", IP: "-", PM: "-", CM: "-", AM: "-"},
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


def test_an_assistant_chat_never_reaches_another_assistants_or_another_users_memory() -> None:
    coder = privacy.read_scope(_chat(ChatKind.SAVED, assistant_id="coder"))
    writer = privacy.read_scope(_chat(ChatKind.SAVED, assistant_id="writer"))
    bob = privacy.read_scope(
        ChatContext(user_id="bob", kind=ChatKind.SAVED, chat_id="c1", assistant_id="coder")
    )
    assert coder.scopes == (OWNER[AM],)
    assert writer.scopes == (Scope(OwnerKind.ASSISTANT, '["ana","writer"]', AM),)
    assert bob.scopes == (Scope(OwnerKind.ASSISTANT, '["bob","coder"]', AM),)
    assert len({coder.scopes, writer.scopes, bob.scopes}) == 3
    # and an ordinary chat of ana's has no assistant cell at all
    assert AM not in privacy.read_scope(_chat(ChatKind.SAVED, folder_id="f1")).banks


def test_commands_in_a_temporary_assistant_chat_change_only_that_assistants_memory() -> None:
    chat = _chat(ChatKind.TEMPORARY, folder_id="f1", assistant_id="coder")
    assert privacy.command_write_scope(chat).owners == {AM: OWNER[AM]}
    assert privacy.write_scope(chat).owners == {}


def test_the_core_profile_goes_into_ordinary_chats_only() -> None:
    assert privacy.uses_profile(_chat(ChatKind.SAVED)) is True
    assert privacy.uses_profile(_chat(ChatKind.SAVED, assistant_id="coder")) is False


@pytest.mark.parametrize(
    ("user", "assistant", "other_user", "other_assistant"),
    [
        ("a/b", "c", "a", "b/c"),
        ('a","b', "c", "a", 'b","c'),
        ("ann", "x", "anna", "x"),
        ("a,b", "c", "a", "b,c"),
    ],
)
def test_assistant_owner_ids_never_collide_across_users_or_assistants(
    user: str, assistant: str, other_user: str, other_assistant: str
) -> None:
    mine = assistants.owner_id(user, assistant)
    theirs = assistants.owner_id(other_user, other_assistant)
    assert mine != theirs
    assert mine.startswith(assistants.owner_prefix(user))
    assert not theirs.startswith(assistants.owner_prefix(user))
    assert assistants.parse_owner(mine) == (user, assistant)


def test_an_assistant_owner_id_too_long_for_the_column_is_refused() -> None:
    with pytest.raises(ValueError, match="too long"):
        assistants.owner_id("u" * 40, "m" * 220)
    assert len(assistants.owner_id("u" * 36, "m" * 200)) <= assistants.MAX_OWNER_CHARS


@pytest.mark.parametrize(
    ("kind", "collaborative", "commands", "whole_memory"),
    [
        (ChatKind.SAVED, False, True, True),
        (ChatKind.TEMPORARY, False, True, True),
        (ChatKind.SAVED, True, True, False),
        (ChatKind.CHANNEL, True, True, False),
        (ChatKind.API, False, False, True),
        (ChatKind.AUTOMATED, False, False, True),
        (ChatKind.TASK, False, False, True),
    ],
)
def test_which_chats_take_commands_and_whole_memory_commands(
    kind: ChatKind, collaborative: bool, commands: bool, whole_memory: bool
) -> None:
    chat = ChatContext(user_id="ana", kind=kind, chat_id="c1", collaborative=collaborative)
    assert privacy.takes_commands(chat) is commands
    assert privacy.takes_whole_memory_commands(chat) is whole_memory
