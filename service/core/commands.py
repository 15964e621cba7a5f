"""`/memory …` commands: parsing and the exact texts shown to the user (DESIGN §9).

Pure: the flow in service/flows/commands.py runs a parsed command against storage and
formats the answer with the helpers here. Texts are Markdown that renders to what it says:
memory content is escaped so a `*` or a backtick in a memory shows as typed.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from rapidfuzz.distance import OSA

from service.core.records import Bank, Memory

PREFIXES = ("/memory", "/memories")


class CommandName(StrEnum):
    """Every command `/memory` understands."""

    HELP = "help"  #: what the commands are
    LIST = "list"  #: memories this chat may see, newest first
    SEARCH = "search"  #: memories matching a text
    ADD = "add"  #: store a memory written by the user
    EDIT = "edit"  #: change a memory's text
    FORGET = "forget"  #: forget one memory, or all after a confirmation
    ASSIGN_BANK = "assign_bank"  #: move a memory between the user's banks
    BANKS = "banks"  #: the banks, their counts, and what this chat may do
    PROFILE = "profile"  #: the core memories injected in every turn
    WHY = "why"  #: what went into the last reply, with numbers
    EXPORT = "export"  #: everything as JSON
    PAUSE = "pause"  #: stop learning from chats
    RESUME = "resume"  #: learn again
    REMINDERS = "reminders"  #: pending and recently shown reminders
    IMPORT = "import"  #: pasted facts or a JSON export, written after a confirmation code


_ALIASES = {
    "ls": CommandName.LIST,
    "find": CommandName.SEARCH,
    "remember": CommandName.ADD,
    "delete": CommandName.FORGET,
    "remove": CommandName.FORGET,
    "rm": CommandName.FORGET,
    "assign": CommandName.ASSIGN_BANK,
    "move": CommandName.ASSIGN_BANK,
    "assign-bank": CommandName.ASSIGN_BANK,
    "?": CommandName.HELP,
    "reminder": CommandName.REMINDERS,
}


SUBCOMMANDS = (
    "forget all",
    "forget r-",
    "import confirm",
    "import openwebui",
    "import openwebui forgotten",
    "export markdown",
)
"""The forms a command takes after its word (each is listed in HELP_TEXT)."""


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed command."""

    name: CommandName | None  #: None when the word after /memory is unknown
    word: str  #: the word as typed
    args: str  #: everything after the command word, stripped
    at: datetime | None = None  #: when it was typed (the turn's time); None = the server clock


def is_command(text: str) -> bool:
    """True when a user message is a `/memory` command (and nothing else)."""
    head = text.strip().split(maxsplit=1)[0].lower() if text.strip() else ""
    return head in PREFIXES


def is_command_or_typo(text: str) -> bool:
    """True for a `/memory` command or a mistyped one (`/memroy list`): a first word one
    edit or one swap of neighbours from a prefix (the filter's `command_typo_hint` rule;
    `/memo` and `/member` are not).
    """
    head = text.strip().split(maxsplit=1)[0].lower() if text.strip() else ""
    return head.startswith("/") and any(OSA.distance(head, prefix) <= 1 for prefix in PREFIXES)


def parse(text: str) -> Command:
    """Split `/memory <word> <args>`; a bare `/memory` is `help`."""
    parts = text.strip().split(maxsplit=2)
    if len(parts) < 2:
        return Command(CommandName.HELP, "help", "")
    word = parts[1].lower()
    args = parts[2].strip() if len(parts) > 2 else ""
    try:
        name: CommandName | None = CommandName(word)
    except ValueError:
        name = _ALIASES.get(word)
    return Command(name, word, args)


# Short ids: the memory's sequence number through a keyed permutation of 30 bits, written in
# Crockford's base32 (no I, L, O, U) — six characters that are read back unambiguously
# (0/O, 1/I/L are the same). The permutation is a balanced Feistel network of two 15-bit
# halves whose round function is a keyed BLAKE2s hash: without the installation's secret
# an id says nothing about its number, nor about how many memories were made between two.
_ID_BITS = 30
_HALF_BITS = _ID_BITS // 2
_HALF_MASK = (1 << _HALF_BITS) - 1
_ROUNDS = 8  # four rounds already make a Feistel permutation pseudorandom; eight leave margin
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
_READ_AS = {**{c: i for i, c in enumerate(_ALPHABET)}, "o": 0, "i": 1, "l": 1}
ID_CHARS = 6
SHORT_ID_SECRET = "short_ids"
"""Name of the installation secret that keys the permutation (storage.installation)."""


# The ids of the versions before the keyed permutation (migration 0011): a fixed bijection of
# the sequence (multiply by an odd constant mod 2**30, then XOR). Memories and reminders made
# before an installation's upgrade to 0011 keep those ids (0011 records how far they go), so
# an id a user saw before the upgrade still finds its memory after it.
_ID_MASK = (1 << _ID_BITS) - 1
_LEGACY_MULTIPLIER = 0x2C9277B5 & _ID_MASK | 1
_LEGACY_INVERSE = pow(_LEGACY_MULTIPLIER, -1, 1 << _ID_BITS)
_LEGACY_XOR = 0x1B873593 & _ID_MASK
SHORT_ID_LEGACY = {
    "memories": "short_ids_legacy_memories",
    "reminders": "short_ids_legacy_reminders",
}
"""Installation secrets (8-byte big-endian numbers) written by migration 0011: the highest
sequence number of a memory / reminder made before it, whose id stays the fixed bijection's."""


def _legacy_permute(seq: int) -> int:
    return ((seq * _LEGACY_MULTIPLIER) & _ID_MASK) ^ _LEGACY_XOR


def _legacy_unpermute(value: int) -> int:
    return ((value ^ _LEGACY_XOR) * _LEGACY_INVERSE) & _ID_MASK


class IdCodec:
    """Short ids ↔ sequence numbers under one key.

    Args:
        key: the installation's secret, 1..64 bytes (BLAKE2s keys are at most 32 bytes; a
            longer key is hashed down first).
        legacy_through: sequence numbers 1..legacy_through keep the ids of the versions
            before the keyed permutation (0: none). The others are walked through the keyed
            permutation until they land on a value no such id uses ("cycle walking"), so the
            two never collide and both read back.
    """

    def __init__(self, key: bytes, *, legacy_through: int = 0) -> None:
        if not key:
            raise ValueError("a short-id key must not be empty")
        self._key = key if len(key) <= 32 else hashlib.blake2s(key).digest()
        self._legacy = max(0, legacy_through)

    def _round(self, number: int, half: int) -> int:
        digest = hashlib.blake2s(
            bytes((number,)) + half.to_bytes(2, "big"), key=self._key, digest_size=4
        ).digest()
        return int.from_bytes(digest, "big") & _HALF_MASK

    def _feistel(self, seq: int) -> int:
        left, right = seq >> _HALF_BITS & _HALF_MASK, seq & _HALF_MASK
        for number in range(_ROUNDS):
            left, right = right, left ^ self._round(number, right)
        return left << _HALF_BITS | right

    def _feistel_inverse(self, value: int) -> int:
        left, right = value >> _HALF_BITS & _HALF_MASK, value & _HALF_MASK
        for number in reversed(range(_ROUNDS)):
            left, right = right ^ self._round(number, left), left
        return left << _HALF_BITS | right

    def _is_legacy_value(self, value: int) -> bool:
        return 1 <= _legacy_unpermute(value) <= self._legacy

    def permute(self, seq: int) -> int:
        """The 30-bit value of `seq` (0 <= seq < 2**30)."""
        if not self._legacy:
            return self._feistel(seq)
        if 1 <= seq <= self._legacy:
            return _legacy_permute(seq)
        value = self._feistel(_legacy_permute(seq))
        while self._is_legacy_value(value):  # about legacy_through / 2**30 extra steps
            value = self._feistel(value)
        return value

    def unpermute(self, value: int) -> int:
        """The inverse of `permute`."""
        if not self._legacy:
            return self._feistel_inverse(value)
        if self._is_legacy_value(value):
            return _legacy_unpermute(value)
        found = self._feistel_inverse(value)
        while self._is_legacy_value(found):
            found = self._feistel_inverse(found)
        return _legacy_unpermute(found)

    def encode(self, seq: int) -> str:
        """The six-character short id of a memory's sequence number (seq < 2**30)."""
        value = self.permute(seq)
        chars = []
        for _ in range(ID_CHARS):
            chars.append(_ALPHABET[value & 31])
            value >>= 5
        return "".join(reversed(chars))

    def parse(self, token: str) -> int | None:
        """The sequence number of a short id as typed (`k7m2qa`, `#K7M2QA`), or None."""
        word = token.strip().lstrip("#").lower().replace("-", "")
        if len(word) != ID_CHARS or any(c not in _READ_AS for c in word):
            return None
        value = 0
        for char in word:
            value = (value << 5) | _READ_AS[char]
        return self.unpermute(value) or None


# One installation per process: the entry point installs the key from the database
# (flows/ids.py) before it serves. Until then a random key of this process is used, so ids
# never follow a fixed, public mapping.
_codec = IdCodec(secrets.token_bytes(32))
_reminder_codec = _codec


def install_id_key(key: bytes, *, legacy_memories: int = 0, legacy_reminders: int = 0) -> None:
    """Use `key` (the installation's secret) for every short id of this process; memories and
    reminders numbered up to `legacy_memories` / `legacy_reminders` keep their ids from before
    the keyed permutation (SHORT_ID_LEGACY).
    """
    global _codec, _reminder_codec
    _codec = IdCodec(key, legacy_through=legacy_memories)
    _reminder_codec = IdCodec(key, legacy_through=legacy_reminders)


def encode_id(seq: int) -> str:
    """The six-character short id of a memory's sequence number (seq < 2**30)."""
    return _codec.encode(seq)


def parse_id(token: str) -> int | None:
    """The sequence number of a short id as typed (`k7m2qa`, `#K7M2QA`), or None."""
    return _codec.parse(token)


def encode_reminder_id(seq: int) -> str:
    """The six characters after `r-` of a reminder's row id (reminders are numbered apart)."""
    return _reminder_codec.encode(seq)


def parse_reminder_id(token: str) -> int | None:
    """The row id of a reminder's six characters, or None."""
    return _reminder_codec.parse(token)


#: Names and aliases a `bank:` prefix is compared with for typos (Bank.parse reads them).
_BANK_WORDS = (
    "personal",
    "interaction_patterns",
    "interaction",
    "patterns",
    "project",
    "projects",
    "chat",
    "discussion",
    "assistant",
)
#: Shorter words are never taken for a mistyped bank: `Cat:` or `That:` one edit from `chat`
#: start ordinary facts.
_MIN_TYPO_CHARS = 5


def split_bank_prefix(args: str) -> tuple[Bank | None, str]:
    """`personal: text` → (Personal, "text"); no bank before a colon → (None, args).

    Raises:
        ValueError: (unknown bank, with the valid names) when the one word before the colon
            is a mistyped bank (`Projcet:`, `personnal:`): one edit or swap of neighbours from
            a name or alias of up to eight letters, two from a longer one. Other words
            (`Note: I like tea`, `Personally: …`) start an ordinary fact.
    """
    head, sep, rest = args.partition(":")
    if sep and head.strip() and len(head) <= 30:
        try:
            return Bank.parse(head), rest.strip()
        except ValueError:
            if is_bank_typo(head):
                raise
    return None, args


def is_bank_typo(word: str) -> bool:
    """True when `word` reads as a mistyped bank name (see `split_bank_prefix`)."""
    key = word.strip().lower().replace("-", "_")
    if len(key) < _MIN_TYPO_CHARS or not key.replace("_", "").isalpha():
        return False
    return any(
        OSA.distance(key, name) <= (1 if len(name) <= 8 else 2)
        for name in _BANK_WORDS
        if len(name) >= _MIN_TYPO_CHARS - 1
    )


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~])")


def escape_markdown(text: str) -> str:
    """Backslash-escape Markdown so the rendered text equals `text`."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def short_id(memory: Memory) -> str:
    """The id users type."""
    return encode_id(memory.seq)


def memory_line(memory: Memory, *, extra: str = "") -> str:
    """One bullet: id, bank, date and the escaped content."""
    merged = f" (merged from {memory.merged_from})" if memory.merged_from else ""
    tail = f"{merged} — {extra}" if extra else merged
    return (
        f"- `{short_id(memory)}` {memory.bank.label} · {memory.created_at:%Y-%m-%d} · "
        f"{escape_markdown(memory.content)}{tail}"
    )


HELP_TEXT = """**Memory commands** (Memory Banks keeps your memories; Open WebUI's own memory is
not used in these chats)

- `/memory list [bank]` — what I remember that this chat may see
- `/memory search <text>` — find memories
- `/memory add [bank:] <text>` — remember something, e.g. `/memory add I keep bees` is kept as
  “User keeps bees” (banks: personal, interaction_patterns, project, chat — `chat:` is
  remembered in this chat only; with an assistant that has its own memory, its memory)
- `/memory edit <id> <text>` — change a memory
- `/memory forget <id>` — forget one memory everywhere
- `/memory forget all` — forget everything (asks for a confirmation code)
- `/memory assign_bank <id> <bank>` — move a memory to another bank
- `/memory banks` — the banks and what this chat may read and write
- `/memory profile` — the core memories sent with every message
- `/memory why` — which memories went into this chat's last reply, with their scores
- `/memory export` — all your memories as JSON (`/memory export markdown` to read them)
- `/memory import` + pasted text — add facts, one a line, or a JSON export (asks for a code)
- `/memory import confirm <code>` — write what the last import preview showed
- `/memory import openwebui` — your memories of Open WebUI's own Memory feature (asks for a
  code; those you forgot here are skipped, `/memory import openwebui forgotten` brings them too)
- `/memory pause` / `/memory resume` — stop or restart learning from your chats
- `/memory reminders` — your reminders; cancel one with `/memory forget r-<id>`
- `/memory help` — this list

In a chat with an assistant that has its own memory (an admin marks it), these commands
see and change only what you told that assistant — its Assistant Memory, named after it in
`list` and `banks` — never your Personal, Interaction Patterns, Project or Chat Memory.

Other words for the same commands: `ls` (list), `find` (search), `remember` (add),
`delete`, `remove`, `rm` (forget), `assign`, `move`, `assign-bank` (assign_bank), `reminder`
(reminders), `?` (help). Under each reply, the “Remember this” button keeps that message.

Ids are the short codes shown by `list`, e.g. `/memory forget k7m2qa`. Commands work in
temporary chats too; only learning by itself never happens there. To set a reminder,
just ask in a chat: “remind me on Friday to call the vet” or “remind me when we talk about
the garden to buy seeds”."""


def unknown_command_text(word: str) -> str:
    """Answer to an unknown command word."""
    return (
        f"I don't know the memory command `{escape_markdown(word)}`. "
        "Type `/memory help` to see the commands."
    )


def counted(count: int, singular: str, plural: str) -> str:
    """`1 memory`, `2 memories`, `0 memories`."""
    return f"{count} {singular if count == 1 else plural}"
