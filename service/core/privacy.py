"""The privacy table of DESIGN §3: which banks of which owners a chat may read and write.

Storage applies the returned scopes inside every SQL statement that reads memories.
"""

from __future__ import annotations

import dataclasses

from service.core import banks
from service.core.records import (
    Bank,
    ChatContext,
    ChatKind,
    OwnerKind,
    ReadScope,
    Scope,
    WriteScope,
)

_NO_MEMORY_KINDS = frozenset({ChatKind.API, ChatKind.AUTOMATED, ChatKind.TASK})


def assistant_cell(chat: ChatContext) -> Scope | None:
    """The sender's cell of the exclusive bank (their memory for the chat's assistant); None
    outside an assistant chat.

    Raises:
        ValueError: the user and assistant ids are too long together (core/assistants.py).
    """
    for row in banks.rows():
        if row.exclusive:
            return _cell(row, chat)
    return None


def uses_profile(chat: ChatContext) -> bool:
    """May the sender's core profile go into this chat? It is written from their Personal
    and Interaction Patterns memories, which an assistant with its own memory never sees.
    """
    return not chat.assistant_id


def _cell(row: banks.BankSpec, chat: ChatContext) -> Scope | None:
    return banks.owner_of(
        row.bank,
        user_id=chat.user_id,
        folder_id=chat.folder_id,
        chat_id=chat.chat_id,
        assistant_id=chat.assistant_id,
    )


def _cells(chat: ChatContext) -> list[Scope]:
    """All cells the rules of core/banks.py allow for this chat, before read/write differences.

    A bank's cell is there when its owner's id is known (the folder of a folder's bank, …),
    and:

    - a private bank (Personal, Assistant Memory): never in a chat others see;
    - an exclusive bank (Assistant Memory): only in a chat with its assistant, and there it
      is the only bank (never Personal, Interaction Patterns, Project or Chat Memory, never
      another assistant's);
    - a bank limited to some kinds of chat (Chat Memory: saved chats and channels): only there.
    """
    cells: list[Scope] = []
    for row in banks.rows():
        if row.private and chat.collaborative:
            continue
        if row.exclusive != bool(chat.assistant_id):
            continue
        if row.chat_kinds is not None and chat.kind not in row.chat_kinds:
            continue
        cell = _cell(row, chat)
        if cell is not None:
            cells.append(cell)
    return cells


def read_scope(chat: ChatContext) -> ReadScope:
    """Cells this chat may inject into the prompt (DESIGN §3, "read").

    - private saved chat: Personal, Interaction Patterns of the sender, the folder's Project Memory;
    - collaborative chat (channel, shared folder or chat, sender ≠ owner): never Personal;
    - temporary chat: the same as a private chat when `read_in_temporary`, else nothing;
    - API call, automation, background task: nothing;
    - a chat with an assistant that has its own memory (`chat.assistant_id`): only the
      sender's memory for that assistant, and nothing in a collaborative chat.

    Folder membership is decided by the filter from Open WebUI at the time of the turn: a chat
    in a folder is only seen by people who can open that folder.
    """
    if chat.kind in _NO_MEMORY_KINDS or not chat.user_id:
        return ReadScope()
    if chat.kind is ChatKind.TEMPORARY and not chat.read_in_temporary:
        return ReadScope()
    return ReadScope(tuple(_cells(chat)))


def hidden_own_cells(chat: ChatContext) -> ReadScope:
    """The sender's cells that this chat hides but a private chat without an assistant would
    read, for `/memory banks` to count ("4 memories — hidden here"): counts, never contents.

    Empty in a collaborative chat: everyone there sees the answer, and how much a user keeps
    in Personal is theirs to tell.
    """
    if chat.collaborative or not chat.user_id:
        return ReadScope()
    shown = set(read_scope(chat).scopes)
    private = dataclasses.replace(chat, assistant_id=None, assistant_name=None)
    return ReadScope(tuple(c for c in _cells(private) if c not in shown))


def write_scope(chat: ChatContext) -> WriteScope:
    """Cells extraction from this chat may write (DESIGN §3, "write").

    Temporary chats, API calls, automations and background tasks write nothing; a
    collaborative chat writes only the speaker's Interaction Patterns and the folder's
    Project Memory, never anyone's Personal bank. A private chat with an assistant that has
    its own memory writes only the sender's memory for that assistant.
    """
    if chat.kind in _NO_MEMORY_KINDS or chat.kind is ChatKind.TEMPORARY or not chat.user_id:
        return WriteScope()
    return WriteScope({cell.bank: cell for cell in _cells(chat)})


def command_write_scope(chat: ChatContext) -> WriteScope:
    """Cells the sender's own `/memory` commands (add, edit, assign_bank) may change.

    The same as `write_scope`, except in a temporary chat: a command is the user's explicit
    request, so it works there as in a private chat (Personal, Interaction Patterns, the
    folder's Project Memory; no Chat Memory, a temporary chat has no chat to keep it). What
    a temporary chat never does is learn by itself: extraction keeps `write_scope`.
    """
    if chat.kind is ChatKind.TEMPORARY and chat.user_id:
        return WriteScope({cell.bank: cell for cell in _cells(chat)})
    return write_scope(chat)


def remember_write_scope(chat: ChatContext, *, author_id: str | None) -> WriteScope:
    """Cells a "Remember this" click may write: the clicker's own explicit command.

    The message's author decides (DESIGN §3, the Remember row):

    - the clicker's own message, or a reply to their own turn (in a private chat the author
      is always the clicker, so an unknown author counts as them): `command_write_scope`;
    - someone else's message in a collaborative chat (their words, or the reply to their
      turn), or an unknown author there: only this chat's Chat Memory. Everyone who reads
      that bank could already read the message; it never becomes the clicker's Personal or
      Interaction Patterns memory, nor the folder's Project Memory.
    """
    scope = command_write_scope(chat)
    own = author_id == chat.user_id or (author_id is None and not chat.collaborative)
    if own:
        return scope
    cell = scope.scope_for(Bank.CHAT)
    return WriteScope({Bank.CHAT: cell} if cell is not None else {})


def default_bank(chat: ChatContext, writable: WriteScope) -> Bank:
    """The bank an explicit write without a bank goes to (`/memory add`, an import): the
    first default of core/banks.py that `writable` holds (the assistant's memory in its
    chat, else Personal, else Interaction Patterns in a shared chat); when it holds none,
    the first default this chat's rules name, so the refusal names the bank meant.
    """
    for cells in (writable.owners.values(), _cells(chat)):
        found = banks.first_default({c.bank for c in cells})
        if found is not None:
            return found
    return banks.by_default_rank()[0].bank


def command_refusal(chat: ChatContext, bank: Bank) -> str:
    """Why the sender's commands may not change `bank` in this chat (one sentence, no
    final period), read from the bank's row in core/banks.py.
    """
    row = banks.spec(bank)
    if row.owner_kind is OwnerKind.FOLDER and not chat.folder_id:
        return f"{row.label} belongs to a folder; this chat is not in one"
    if chat.assistant_id and not chat.collaborative:
        name = chat.assistant_name or chat.assistant_id
        return (
            f"{name} keeps its own memory, so commands here change only that; "
            f"change your {bank.label} memories in an ordinary chat"
        )
    if row.exclusive:
        return (
            f"{row.label} is changed in a chat with its assistant (a model an admin gave "
            "its own memory)"
        )
    if row.chat_kinds is not None:
        return f"{row.label} needs a saved chat"
    return f"{bank.label} memories cannot be changed in a shared chat"


def takes_commands(chat: ChatContext) -> bool:
    """Do `/memory` commands work here? In chats only (saved, temporary, channel): an API
    call, an automation or a background task has nobody to answer.
    """
    return chat.kind not in _NO_MEMORY_KINDS


def takes_whole_memory_commands(chat: ChatContext) -> bool:
    """May `forget all` and `import` run here? They change everything of the sender at once
    and their previews show it, so only in a chat nobody else sees.
    """
    return not chat.collaborative
