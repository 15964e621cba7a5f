"""The "Remember this" button (an Open WebUI Action under a message): what it stores, and
the one status line that says so (pure).

A click asks to keep one message. With an LLM configured the message goes through the
extraction prompt (its facts, each a memory); without one the message itself becomes one
memory. Either way the text passes the guards of `/memory add` (instructions refused,
secrets redacted), the write follows the clicker's own command rules
(`privacy.remember_write_scope`) and is deduplicated, so clicking twice stores once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from service.core import banks, limits, person, safety
from service.core import commands as text
from service.core.extraction import TurnText
from service.core.records import Bank, Memory, WriteScope

TAG_REMEMBER = "remember:button"
"""Tag of memories stored by the Remember button (finds a message's memories again)."""

REPLY_PREFIX = "Remember this from your reply:\n\n"
"""How an assistant's reply is put to the extraction prompt, which otherwise never stores
what the assistant said: the click is the user taking the reply as theirs."""

MAX_CONTEXT_MESSAGES = 2
"""Earlier messages sent with the clicked one, so "yes, that one" can be understood."""


class Role(StrEnum):
    """Who wrote the clicked message."""

    USER = "user"
    ASSISTANT = "assistant"


class Refusal(StrEnum):
    """Why a text is not kept at all."""

    EMPTY = "empty"
    COMMAND = "command"  #: a /memory command, or the answer the commands pipe gave it
    INSTRUCTION = "instruction"
    SECRET = "secret"
    TOO_LONG = "too_long"


def guard(content: str, *, role: Role) -> str | Refusal:
    """The text as one memory would keep it, or why it is not kept.

    The user's own words are put in the third person like `/memory add` ("I keep bees" →
    "User keeps bees"); an assistant's reply already speaks of the user as "you", which
    reads right under "I recall the following about you", and its "I" is the assistant.
    """
    cleaned = " ".join(content.split())
    if not cleaned:
        return Refusal.EMPTY
    if safety.looks_like_instruction(cleaned):
        return Refusal.INSTRUCTION
    redacted = safety.redact_secrets(cleaned)
    if safety.mostly_redacted(redacted):
        return Refusal.SECRET
    kept = person.third_person(redacted) if role is Role.USER else redacted
    if len(kept) > limits.MAX_FACT_CHARS:
        return Refusal.TOO_LONG
    return kept


def is_command_turn(*, role: Role, content: str, context: Sequence[tuple[str, str]]) -> bool:
    """True when the clicked message is a `/memory` command (or a mistyped one), or the
    answer to one: the user message it replies to is the last user message of `context`.
    Such a text (the help, a list, an export) says nothing about the user; extraction could
    store its examples as facts.
    """
    if role is Role.USER:
        return text.is_command_or_typo(content)
    asked = next((said for who, said in reversed(context) if who == Role.USER.value), None)
    return asked is not None and text.is_command_or_typo(asked)


def refusal_line(reason: Refusal) -> str:
    """The status line of a click refused before anything is read or written."""
    return f"Not remembered: {_REFUSALS[reason]}"


def default_bank(scope: WriteScope) -> Bank | None:
    """Where the message itself goes without an LLM: the first bank of Assistant Memory (a
    chat with an assistant that keeps its own: the only bank there), Personal, Interaction
    Patterns (a shared chat, like `/memory add` there), Chat Memory (someone else's message)
    that the scope lets the click write; None when it may write none of them.
    """
    return banks.first_default(set(scope.owners))


def turn_text(*, role: Role, content: str, context: Sequence[tuple[str, str]]) -> TurnText:
    """The clicked message as the extraction prompt's one new user message, with up to
    MAX_CONTEXT_MESSAGES earlier (role, text) pairs as history.
    """
    said = content if role is Role.USER else REPLY_PREFIX + content
    return TurnText(
        user_message=said,
        assistant_message=None,
        history=tuple(context)[-MAX_CONTEXT_MESSAGES:],
    )


class Outcome(StrEnum):
    """What a click did (the API's `status`)."""

    STORED = "stored"  #: at least one memory written
    ALREADY = "already"  #: this message's memories are stored already (a second click)
    DUPLICATE = "duplicate"  #: every fact is known already
    REFUSED = "refused"  #: instruction, secret, too long, empty
    NOTHING = "nothing"  #: the LLM found no lasting fact
    NOT_ALLOWED = "not_allowed"  #: the chat's rules let nothing be written here
    DISCARDED = "discarded"  #: a forget all, chat or account deletion landed meanwhile
    FORGOTTEN = "forgotten"  #: the user forgot this fact while the LLM answered


@dataclass(frozen=True, slots=True)
class Tally:
    """What happened to a click's facts."""

    written: tuple[Memory, ...] = ()
    known: tuple[Memory, ...] = ()  #: stored memories the facts restate
    refused: tuple[Refusal, ...] = ()
    not_allowed: int = 0  #: facts for banks this chat may not write
    forgotten: int = 0  #: facts the user forgot meanwhile


DISCARD_REASONS = {
    "forget_all": "you forgot all your memories while I was reading this message",
    "chat_deleted": "this chat was deleted while I was reading the message",
    "user_deleted": "the account was deleted while I was reading the message",
    "gone": "the request ran out before the answer came; click again",
}

_REFUSALS = {
    Refusal.EMPTY: "this message has no text to remember",
    Refusal.COMMAND: (
        "this is a /memory command or its answer, not something said in the chat — to keep "
        "a fact, type `/memory add <fact>`"
    ),
    Refusal.INSTRUCTION: (
        "it reads as an instruction to the assistant, and memories hold facts, not orders"
    ),
    Refusal.SECRET: ("it is only a password, key or code, and memories never keep those"),
    Refusal.TOO_LONG: (
        f"it is too long for one memory (at most {limits.MAX_FACT_CHARS} characters); "
        "with an LLM configured its facts are picked out instead"
    ),
}


def _item(memory: Memory) -> str:
    where = "" if memory.bank is Bank.PERSONAL else f" [{memory.bank.label}]"
    return f"{' '.join(memory.content.split())}{where} (#{text.short_id(memory)})"


def _items(memories: Sequence[Memory]) -> str:
    return " · ".join(_item(m) for m in memories)


def status_line(tally: Tally) -> tuple[Outcome, str]:
    """The outcome and the one status line shown under the message."""
    if tally.written:
        also = []
        if tally.known:
            also.append(f"{len(tally.known)} already known")
        if tally.refused:
            also.append(f"{len(tally.refused)} refused")
        if tally.not_allowed:
            also.append(f"{tally.not_allowed} not allowed in this chat")
        tail = f" ({'; '.join(also)})" if also else ""
        return Outcome.STORED, f"Remembered: {_items(tally.written)}{tail}"
    if tally.known:
        return Outcome.DUPLICATE, f"Nothing new to remember — I already know: {_items(tally.known)}"
    if tally.forgotten:
        return (
            Outcome.FORGOTTEN,
            "Not remembered: you forgot this while I was reading the message",
        )
    if tally.refused:
        return Outcome.REFUSED, f"Not remembered: {_REFUSALS[tally.refused[0]]}"
    if tally.not_allowed:
        return Outcome.NOT_ALLOWED, (
            "Not remembered: what this message says belongs to a bank this chat may not "
            "write (a temporary chat keeps no Chat Memory; a shared chat never writes "
            "Personal memories)"
        )
    return Outcome.NOTHING, "Nothing to remember: I found no lasting fact in this message"


def already_line(memories: Sequence[Memory]) -> str:
    """A second click on a message whose memories are stored."""
    return f"Already remembered: {_items(memories)}"


def discarded_line(reason: str) -> str:
    """A forget all, a chat or account deletion landed while the LLM answered."""
    return f"Not remembered: {DISCARD_REASONS.get(reason, DISCARD_REASONS['gone'])}"


NO_CHAT = "Not remembered: memories are kept from chats only"
NO_BANK = "Not remembered: this chat may not keep memories from this message"
