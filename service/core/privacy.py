"""The privacy table of DESIGN §3: which banks of which owners a chat may read and write.

Storage applies the returned scopes inside every SQL statement that reads memories.
"""

from __future__ import annotations

import dataclasses

from service.core import assistants
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
    """The sender's memory for the chat's assistant; None outside an assistant chat.

    Raises:
        ValueError: the user and assistant ids are too long together (core/assistants.py).
    """
    if not chat.assistant_id or not chat.user_id:
        return None
    return Scope(
        OwnerKind.ASSISTANT,
        assistants.owner_id(chat.user_id, chat.assistant_id),
        Bank.ASSISTANT,
    )


def uses_profile(chat: ChatContext) -> bool:
    """May the sender's core profile go into this chat? It is written from their Personal
    and Interaction Patterns memories, which an assistant with its own memory never sees."""
    return not chat.assistant_id


def _cells(chat: ChatContext) -> list[Scope]:
    """All cells the rules allow for this chat, before read/write differences."""
    assistant = assistant_cell(chat)
    if assistant is not None:
        # An assistant with its own memory: only the sender's memory for that assistant,
        # never Personal, Interaction Patterns, Project or Chat Memory, never another
        # assistant's. Like Personal, never in a chat others see.
        return [] if chat.collaborative else [assistant]
    cells: list[Scope] = []
    if not chat.collaborative:
        cells.append(Scope(OwnerKind.USER, chat.user_id, Bank.PERSONAL))
    cells.append(Scope(OwnerKind.USER, chat.user_id, Bank.INTERACTION))
    if chat.folder_id:
        cells.append(Scope(OwnerKind.FOLDER, chat.folder_id, Bank.PROJECT))
    if chat.chat_id and chat.kind in (ChatKind.SAVED, ChatKind.CHANNEL):
        # everyone in the chat already sees the conversation these facts come from
        cells.append(Scope(OwnerKind.CHAT, chat.chat_id, Bank.CHAT))
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
