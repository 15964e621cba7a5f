"""`python -m service cli-reference`: the command-line reference, made from the commands.

The page (docs/reference/cli.md) is generated from the typer app itself: each command's
docstring, its usage line and the help record click makes for each option (the text
`--help` prints). So the reference lives once, in the commands' code, and
`tests/unit/test_cli_reference.py` fails when the committed page and the code part ways.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from service.cli.failures import fail

REGENERATE = "python -m service cli-reference --write docs/reference/cli.md"
"""The command that rewrites the page (named in its first lines and in the test's message)."""

PROG = "python -m service"

HEADER = f"""# Command-line reference

<!-- generated from service/cli/ by `{REGENERATE}`; edit the commands, not this page -->

Every command runs as `{PROG} …` (from a checkout: `.venv/bin/python -m service …`).
An installed wheel also puts the same commands on the PATH as `memory-service …`.
Each one exits 0 when it did its work and 1 with a sentence on stderr when it could not.
`--help` after any command prints the same text as below.
"""

_REPOSITORY = str(Path(__file__).resolve().parents[2]) + "/"
"""Defaults that are paths of this checkout are printed relative to it, so the page is the
same on every machine."""


def _plain(text: str) -> str:
    """`text` with the machine's own folders taken out (checkout, home)."""
    text = text.replace(_REPOSITORY, "")
    home = str(Path.home())
    return text.replace(home + "/", "~/") if home != "/" else text


def _cell(text: str) -> str:
    return " ".join(_plain(text).split()).replace("|", "\\|")


def _commands(group: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, command) of `group` and every command under it, in `--help` order."""
    yield path, group
    subcommands = getattr(group, "commands", None)
    if subcommands is None:
        return
    context = group.context_class(group, info_name=path[-1] if path else PROG)
    for name in group.list_commands(context):
        command = subcommands[name]
        if not command.hidden:
            yield from _commands(command, (*path, name))


def _section(path: tuple[str, ...], command: Any) -> list[str]:
    name = " ".join((PROG, *path))
    context = command.context_class(command, info_name=name)
    usage = " ".join([name, *command.collect_usage_pieces(context)])
    lines = [f"## `{name}`", ""]
    if command.help:
        lines += [_plain(typer_text(command.help)), ""]
    lines += [f"Usage: `{usage}`", ""]
    records = [
        record
        for parameter in command.params
        if not parameter.hidden
        for record in [parameter.get_help_record(context)]
        if record is not None
    ]
    if records:
        lines += ["| option | meaning |", "|---|---|"]
        lines += [f"| `{_cell(option)}` | {_cell(meaning)} |" for option, meaning in records]
        lines.append("")
    subcommands = getattr(command, "commands", None)
    if subcommands:
        lines += ["| command | what it does |", "|---|---|"]
        for sub in command.list_commands(context):
            short = subcommands[sub].get_short_help_str(limit=300)
            lines.append(f"| [`{sub}`](#{_anchor(name + ' ' + sub)}) | {_cell(short)} |")
        lines.append("")
    return lines


def typer_text(help_text: str) -> str:
    """A docstring as Markdown: its paragraphs, each on one line."""
    paragraphs = [" ".join(p.split()) for p in help_text.strip().split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading `` `python -m service x y` ``."""
    return "-".join(heading.lower().replace("`", "").split()).replace(".", "")


def render_reference(app: typer.Typer | None = None) -> str:
    """The Markdown page of every command of `app` (default: `python -m service`)."""
    if app is None:
        from service.cli.main import app as main_app  # main imports this module

        app = main_app
    root = typer.main.get_command(app)
    lines = [HEADER]
    for path, command in _commands(root, ()):
        lines += _section(path, command)
    return "\n".join(lines).rstrip() + "\n"


def command(
    write: Annotated[Path | None, typer.Option(help="Write the reference to this file.")] = None,
    check: Annotated[
        Path | None, typer.Option(help="Exit 1 when this file differs from the commands.")
    ] = None,
) -> None:
    """Print the command-line reference made from the commands (or write or check a file)."""
    page = render_reference()
    if write is not None:
        try:
            write.write_text(page, encoding="utf-8")
        except OSError as exc:
            fail(exc, verbose=False)
        return
    if check is None:
        typer.echo(page, nl=False)
        return
    try:
        current = check.read_text(encoding="utf-8")
    except OSError as exc:
        fail(exc, verbose=False)
    if current != page:
        typer.echo(
            f"{check}: the CLI reference differs from the commands; run `{REGENERATE}`.", err=True
        )
        raise typer.Exit(code=1)
