"""The banks, described once (DESIGN §3): one row per bank that every reader takes its rules from.

The privacy table (core/privacy.py), the extraction prompt's bank rule (core/extraction.py),
the labels and names users type (`Bank.label`, `Bank.parse`), the default bank of an explicit
write, `/memory banks`, exports, imports and the cells of an owner all read `TABLE` instead of
naming banks one by one. A new bank is a new `Bank` member and a new row here;
tests/unit/test_bank_table.py fails when a member has no row, and shows that each reader
follows the row. The walk-through is in docs/discussions/architecture.md ("Banks").
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

from service.core import assistants
from service.core.records import Bank, ChatKind, OwnerKind, Scope


@dataclass(frozen=True, slots=True)
class BankSpec:
    """What the service knows about one bank."""

    bank: Bank  #: the enum member; its value is what the database stores
    label: str  #: the human name users see ("Project Memory")
    prompt: str  #: what the extraction prompt says the bank holds (English, no quotes)
    owner_kind: OwnerKind  #: who owns its memories: a user, a folder, a chat, user + assistant
    #: what else a user may type for it in `/memory add personal: …`, `assign_bank`, tools
    aliases: tuple[str, ...] = ()
    #: privacy class: True = the owner's alone, never read or written in a chat others see
    #: (a channel, a shared chat or a shared folder); False = readable there too
    private: bool = False
    #: True = the bank of a chat with its own memory (an assistant an admin gave one): there it
    #: is the only bank read and written, and it is never read or written anywhere else
    exclusive: bool = False
    #: the kinds of chat whose cell of this bank exists; None = every kind privacy allows
    chat_kinds: frozenset[ChatKind] | None = None
    #: exported, imported and added outside its chat (False: it lives and dies with its chat)
    portable: bool = True
    #: one of the banks the user's core profile is written from (core/profile.py)
    in_profile: bool = False
    #: the order in which an explicit write without a bank (`/memory add`, a "Remember this"
    #: click, the memory tool, an import) picks the first one it may write; None = never
    #: picked without being named
    default_rank: int | None = None
    #: listed by `/memory banks` (every bank, so a user sees where their memories are)
    listed: bool = True


TABLE: tuple[BankSpec, ...] = (
    BankSpec(
        Bank.PERSONAL,
        label="Personal",
        prompt="identity and private facts",
        owner_kind=OwnerKind.USER,
        private=True,
        in_profile=True,
        default_rank=1,
    ),
    BankSpec(
        Bank.INTERACTION,
        label="Interaction Patterns",
        prompt="how the user likes answers and how they work",
        owner_kind=OwnerKind.USER,
        aliases=("interaction", "patterns"),
        in_profile=True,
        default_rank=2,
    ),
    BankSpec(
        Bank.PROJECT,
        label="Project Memory",
        prompt="facts about the shared project of this chat's folder",
        owner_kind=OwnerKind.FOLDER,
        aliases=("project memory", "projects"),
    ),
    BankSpec(
        Bank.CHAT,
        label="Chat Memory",
        prompt='facts that only matter in this conversation, e.g. "In this chat we are drafting '
        'a wedding speech for Sam and Ari"',
        owner_kind=OwnerKind.CHAT,
        aliases=("chat memory", "discussion", "this chat"),
        # everyone in the chat already sees the conversation these facts come from; a
        # temporary chat has no chat to keep them, an API call no chat at all
        chat_kinds=frozenset({ChatKind.SAVED, ChatKind.CHANNEL}),
        portable=False,
        default_rank=3,
    ),
    BankSpec(
        Bank.ASSISTANT,
        label="Assistant Memory",
        prompt="this assistant keeps its own memory of the user",
        owner_kind=OwnerKind.ASSISTANT,
        aliases=("assistant memory", "this assistant"),
        private=True,
        exclusive=True,
        default_rank=0,
    ),
)
"""One row per `Bank` member, in the order cells, prompts and `/memory banks` list them."""


def spec(bank: Bank) -> BankSpec:
    """The row of `bank`.

    Raises:
        LookupError: `bank` has no row (a member added to `Bank` but not to `TABLE`).
    """
    for row in TABLE:
        if row.bank is bank:
            return row
    raise LookupError(f"bank {bank.value!r} has no row in service/core/banks.py TABLE")


def rows() -> Iterator[BankSpec]:
    """The rows in table order (read at call time, so a changed table is seen at once)."""
    return iter(TABLE)


def by_default_rank() -> list[BankSpec]:
    """Rows that an explicit write may pick without a name, first choice first."""
    return sorted(
        (r for r in TABLE if r.default_rank is not None), key=lambda r: r.default_rank or 0
    )


def first_default(writable: frozenset[Bank] | set[Bank]) -> Bank | None:
    """The bank an explicit write without a bank goes to, among `writable`; None when none
    of the defaults is writable.
    """
    for row in by_default_rank():
        if row.bank in writable:
            return row.bank
    return None


def owner_of(
    bank: Bank,
    *,
    user_id: str | None,
    folder_id: str | None = None,
    chat_id: str | None = None,
    assistant_id: str | None = None,
) -> Scope | None:
    """The cell of `bank` for these ids, or None when the id its owner needs is missing.

    A user's banks need `user_id`, Project Memory `folder_id`, Chat Memory `chat_id`, and
    Assistant Memory both `user_id` and `assistant_id`.

    Raises:
        ValueError: the user and assistant ids are too long together (core/assistants.py).
    """
    kind = spec(bank).owner_kind
    owner: str | None
    if kind is OwnerKind.USER:
        owner = user_id
    elif kind is OwnerKind.FOLDER:
        owner = folder_id
    elif kind is OwnerKind.CHAT:
        owner = chat_id
    else:
        owner = assistants.owner_id(user_id, assistant_id) if user_id and assistant_id else None
    return Scope(kind, owner, bank) if owner else None


def owner_ids(cell: Scope) -> tuple[str | None, str | None]:
    """(folder_id, assistant_id) of a cell, as exports and the API name its owner: the folder
    of a folder's bank, the assistant of a user's memory for one; None where not one.
    """
    folder = cell.owner_id if cell.owner_kind is OwnerKind.FOLDER else None
    parsed = (
        assistants.parse_owner(cell.owner_id) if cell.owner_kind is OwnerKind.ASSISTANT else None
    )
    return folder, parsed[1] if parsed else None


def of_owner(owner_kind: OwnerKind) -> list[Bank]:
    """The banks one owner of `owner_kind` has (a user: Personal and Interaction Patterns)."""
    return [r.bank for r in TABLE if r.owner_kind is owner_kind]


def names_sentence() -> str:
    """The names `Bank.parse` accepts, for its error: "personal, …, chat or assistant"."""
    names = [r.bank.value for r in TABLE]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


def prompt_rule(width: int = 92) -> str:
    """The extraction prompt's line on banks, written from the table (one `- bank:` item,
    wrapped like the rest of the prompt).

    The named banks are offered by value with what they hold; an exclusive bank is the one
    to use for every fact when it is the only one allowed.
    """
    named = [f'"{r.bank.value}" ({r.prompt})' for r in TABLE if not r.exclusive]
    listed = ", ".join(named[:-1]) + f" or {named[-1]}" if len(named) > 1 else "".join(named)
    rule = f"bank: {listed}. Use only the banks listed as allowed"
    for row in TABLE:
        if row.exclusive:
            rule += (
                f'; when the only one is "{row.bank.value}" ({row.prompt}), use it for every fact'
            )
    return textwrap.fill(
        rule + ".", width=width, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False
    )


def owner_cells(owner_kind: OwnerKind, owner_id: str) -> tuple[Scope, ...]:
    """Every cell one owner has: a user's Personal and Interaction Patterns, a folder's
    Project Memory, a chat's Chat Memory, a user's memory for one assistant.
    """
    return tuple(Scope(owner_kind, owner_id, r.bank) for r in TABLE if r.owner_kind is owner_kind)


def user_cells(
    user_id: str, *, folder_id: str | None = None, assistant_id: str | None = None
) -> list[Scope]:
    """The cells a user manages outside any chat (the API, exports, imports): their own
    banks, the Project Memory of `folder_id` and their memory for `assistant_id` when given;
    never a bank that lives in its chat (`portable` False).

    Raises:
        ValueError: the user and assistant ids are too long together.
    """
    cells = []
    for row in TABLE:
        if not row.portable:
            continue
        cell = owner_of(row.bank, user_id=user_id, folder_id=folder_id, assistant_id=assistant_id)
        if cell is not None:
            cells.append(cell)
    return cells


def outside_chat_cell(
    bank: Bank, *, user_id: str, folder_id: str | None, assistant_id: str | None
) -> Scope:
    """The cell a memory of `bank` given outside a chat goes to (the API's add, an import
    file): the ids it names must be the ones its owner needs, and no other.

    Raises:
        ValueError: a sentence: a bank that lives in its chat, a folder's bank without
            `folder_id`, an assistant's without `assistant_id` or another with one, or ids
            too long together.
    """
    row = spec(bank)
    if not row.portable:
        raise ValueError(
            f"{row.label} is added from inside its chat (/memory add {row.bank.value}: …)"
        )
    if row.owner_kind is OwnerKind.FOLDER and not folder_id:
        raise ValueError(f"a {row.label} needs the folder_id of its project")
    if (row.owner_kind is OwnerKind.ASSISTANT) != bool(assistant_id):
        raise ValueError(f"an {row.label} needs assistant_id, and only it takes one")
    cell = owner_of(bank, user_id=user_id, folder_id=folder_id, assistant_id=assistant_id)
    if cell is None:
        raise ValueError(f"{row.label} needs its owner's id")
    return cell
