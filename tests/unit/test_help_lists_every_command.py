"""`/memory help` names every command the service runs: each command of the table, each of
its other words and each of its forms (issue 18, item 6)."""

from __future__ import annotations

import re

from service.core import commands
from service.core.commands import HELP_TEXT, SUBCOMMANDS, CommandName
from service.flows.commands import _HANDLERS


def test_every_command_has_a_handler_and_every_handler_a_command() -> None:
    assert set(_HANDLERS) == set(CommandName)


def test_help_names_every_command_of_the_table() -> None:
    missing = [n.value for n in _HANDLERS if f"`/memory {n.value}" not in HELP_TEXT]
    assert missing == []


def test_help_names_every_other_word_with_its_command() -> None:
    aliases = commands._ALIASES
    missing = [
        word
        for word, name in aliases.items()
        if not re.search(rf"`{re.escape(word)}`[^(]*\({re.escape(name.value)}\)", HELP_TEXT)
    ]
    assert (len(aliases), missing) == (11, [])


def test_help_names_every_form_of_a_command() -> None:
    missing = [form for form in SUBCOMMANDS if f"`/memory {form}" not in HELP_TEXT]
    assert (len(SUBCOMMANDS), missing) == (6, [])


def test_every_alias_and_form_parses_to_its_command() -> None:
    parsed = {word: commands.parse(f"/memory {word} x").name for word in commands._ALIASES}
    assert parsed == commands._ALIASES
    forms = {form: commands.parse(f"/memory {form}").name for form in SUBCOMMANDS}
    assert forms == {
        "forget all": CommandName.FORGET,
        "forget r-": CommandName.FORGET,
        "import confirm": CommandName.IMPORT,
        "import openwebui": CommandName.IMPORT,
        "import openwebui forgotten": CommandName.IMPORT,
        "export markdown": CommandName.EXPORT,
    }


def test_help_mentions_the_remember_button() -> None:
    assert "“Remember this” button" in HELP_TEXT
