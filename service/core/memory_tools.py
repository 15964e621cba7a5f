"""The memory tools a tool-calling model uses during a chat (filter/memory_tools.py): which
cells each tool may touch, and the short answers the model reads (DESIGN §3).

The model acts for the turn's sender, inside the chat it answers, so its tools get exactly
that chat's rules, never more:

- search reads what the chat's memory block may show (`privacy.read_scope`): nothing for
  API calls, automations and background tasks; never Personal memory in a shared chat,
  channel or shared folder; only the assistant's memory in a chat with an assistant that
  keeps its own;
- add writes where extraction from this chat may write (`privacy.write_scope`), not where
  the user's own typed commands may: the model decides to store, the user did not type it,
  so a temporary chat stores nothing;
- forget removes only an active memory the model could have found in this chat and that
  this chat may write: the cells of both scopes.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.core import banks, privacy
from service.core import commands as text
from service.core.records import Bank, ChatContext, ChatKind, Memory, ReadScope, Scope

TAG_TOOL = "tool:model"
"""Tag of a memory the model added with the memory tool (its origin, like `remember:button`)."""

CONFIDENCE = 0.9
"""Confidence of a memory the model added: the model wrote the sentence, the user did not
check it (a memory the user typed has 1.0)."""

SEARCH_LIMIT = 5
"""Memories a search returns unless the model asks for more (at most MAX_SEARCH_LIMIT): a
small model reads a short list best."""

MAX_SEARCH_LIMIT = 20

_NO_MEMORY_KINDS = (ChatKind.API, ChatKind.AUTOMATED, ChatKind.TASK)


def search_scope(chat: ChatContext) -> ReadScope:
    """The cells `memory_search` reads: those the chat's memory block may show."""
    return privacy.read_scope(chat)


def add_cell(chat: ChatContext, bank: Bank | None) -> Scope | None:
    """The cell `memory_add` writes, or None when this chat may not write `bank`.

    Without a bank: the assistant's memory in its chat, Interaction Patterns in a shared
    chat, else Personal (the default of `/memory add`).
    """
    writable = privacy.write_scope(chat)
    if bank is None:
        bank = banks.first_default(set(writable.owners))
        if bank is None:
            return None
    return writable.scope_for(bank)


def forget_scope(chat: ChatContext) -> ReadScope:
    """The cells `memory_forget` may forget in: readable and writable in this chat."""
    readable = set(search_scope(chat).scopes)
    return ReadScope(
        tuple(c for c in privacy.write_scope(chat).as_read_scope().scopes if c in readable)
    )


# --- what the model reads ------------------------------------------------------------------


def memory_item(memory: Memory) -> str:
    """One line: id, bank, date, content (plain text: the model reads it, nobody renders it)."""
    day = f"{memory.created_at:%Y-%m-%d}"
    return f"- {text.short_id(memory)} · {memory.bank.label} · {day} · {memory.content}"


def hidden_note(chat: ChatContext) -> str:
    """What this chat keeps from the model, in one sentence ("" when nothing)."""
    if chat.assistant_id:
        return (
            " Only your own memory as this assistant is available here, never the user's "
            "other memories."
        )
    if chat.collaborative:
        return " Personal memories are never available in a shared chat."
    return ""


def no_memory_here(chat: ChatContext) -> str | None:
    """Why no tool works in this chat, or None when they do."""
    if chat.kind in _NO_MEMORY_KINDS or not chat.user_id:
        return "Memory is not available here (memory works in chats only)."
    return None


def search_text(chat: ChatContext, query: str, found: Sequence[Memory]) -> str:
    """memory_search's answer: the found memories one a line, or why none is shown."""
    if not found:
        return f"No memory matches “{query}”.{hidden_note(chat)}"
    lines = "\n".join(memory_item(m) for m in found)
    return (
        f"{text.counted(len(found), 'memory', 'memories')} found (id · bank · date · text):\n"
        f"{lines}"
    )


def add_refused_text(chat: ChatContext, bank: Bank | None) -> str:
    """Why nothing may be written from this chat (or into `bank` here)."""
    if chat.kind is ChatKind.TEMPORARY:
        return "Not remembered: nothing is stored from a temporary chat."
    if bank is not None:
        where = (
            "Personal memory is never written in a shared chat"
            if bank is Bank.PERSONAL and chat.collaborative
            else f"{bank.label} cannot be written in this chat"
        )
        return f"Not remembered: {where}. Leave the bank out to use this chat's default."
    return "Not remembered: this chat may not store memories."


def unknown_bank_text(reason: str) -> str:
    """`reason` is Bank.parse's sentence, which names the valid banks."""
    return f"Not remembered: {reason}; or leave the bank out."


def added_text(memory: Memory) -> str:
    """memory_add's answer for a stored memory: its bank, id and text."""
    return f"Remembered in {memory.bank.label} as {text.short_id(memory)}: {memory.content}"


def duplicate_text(memory: Memory | None) -> str:
    """memory_add's answer when the fact is already remembered (`memory` None: no id to show)."""
    if memory is None:
        return "Already remembered: nothing new was stored."
    return f"Already remembered as {text.short_id(memory)}: {memory.content}"


INSTRUCTION_TEXT = (
    "Not remembered: memories hold facts about the user, not instructions to the assistant."
)
SECRET_TEXT = "Not remembered: it is only a password, key or code, and memories never keep those."
PAUSED_TEXT = "Not remembered: the user paused memory (/memory resume switches it back on)."
EMPTY_TEXT = "Not remembered: the text is empty."


def forgotten_text(memory: Memory) -> str:
    """memory_forget's answer for a forgotten memory."""
    return f"Forgot {text.short_id(memory)}: {memory.content}"


def not_an_id_text(token: str) -> str:
    """memory_forget's answer when `token` is not a short id."""
    return f"“{token}” is not a memory id; use an id that memory_search showed."


def not_found_text(chat: ChatContext, token: str) -> str:
    """memory_forget's answer when no memory with that id may be forgotten in this chat."""
    return (
        f"No memory {token.strip().lstrip('#')} can be forgotten in this chat; search first and "
        f"use an id it shows.{hidden_note(chat)}"
    )


def forget_refused_text(chat: ChatContext) -> str:
    """memory_forget's answer when this chat may not change memories."""
    if chat.kind is ChatKind.TEMPORARY:
        return (
            "Not forgotten: memories are not changed from a temporary chat (the user can type "
            "/memory forget <id>)."
        )
    return "Not forgotten: this chat may not change memories."
