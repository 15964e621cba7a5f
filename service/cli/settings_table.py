"""`python -m service settings-table`: the settings reference's table, made from `Settings`.

The table is written between two marker lines of docs/reference/settings.md, so the
descriptions live once, in `service/config.py` (each field's `description`), and
`tests/unit/test_settings_table.py` fails when the page and the settings part ways.
"""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer
from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from service.cli.failures import fail
from service.config import Settings

REGENERATE = "python -m service settings-table --write docs/reference/settings.md"
"""The command that rewrites the table (named in the markers and in the test's message)."""

START = f"<!-- settings-table: generated from service/config.py by `{REGENERATE}` -->"
END = "<!-- settings-table: end -->"

HEADER = "| variable | type | default | meaning |\n|---|---|---|---|"

#: How a default nobody set reads in the table, per field (the description says what happens).
UNSET = "unset"
#: What a secret's default reads as: the value itself is never printed.
HIDDEN = "(secret)"

_CHOICES = re.compile(r"^\^\(([\w|]+)\)\$$")


def _plain_type(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without `None`, whether `None` was allowed)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return (args[0] if len(args) == 1 else annotation), len(args) < len(get_args(annotation))
    return annotation, False


def _bounds(info: FieldInfo) -> str:
    parts = []
    for item in info.metadata:
        for kind, attribute, sign in (
            (Ge, "ge", "≥"),
            (Gt, "gt", ">"),
            (Le, "le", "≤"),
            (Lt, "lt", "<"),
        ):
            if isinstance(item, kind):
                parts.append(f"{sign} {_number(getattr(item, attribute))}")
    return ", ".join(parts)


def _pattern_choices(info: FieldInfo) -> list[str]:
    for item in info.metadata:
        found = _CHOICES.match(getattr(item, "pattern", None) or "")
        if found:
            return found.group(1).split("|")
    return []


def describe_type(info: FieldInfo) -> str:
    """The type column, such as `integer, ≥ 1, ≤ 200`, `one of onnx, torch` or `secret`."""
    plain, _ = _plain_type(info.annotation)
    choices = list(get_args(plain)) if get_origin(plain) is Literal else _pattern_choices(info)
    if choices:
        return "one of " + ", ".join(f"`{c}`" for c in choices)
    names = {bool: "`true`/`false`", int: "integer", float: "number", str: "text"}
    name = names.get(plain) or {Path: "folder", SecretStr: "secret"}.get(plain, str(plain))
    bounds = _bounds(info)
    return f"{name}, {bounds}" if bounds else name


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe_default(info: FieldInfo) -> str:
    """The default as one would write it in the environment; a secret's is never shown."""
    plain, _ = _plain_type(info.annotation)
    value = info.default
    if value is None:
        return UNSET
    if plain is SecretStr:
        return HIDDEN
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"`{_number(value)}`"
    return f"`{value}`"


def render_table(settings: type[BaseModel] = Settings) -> str:
    """The Markdown table of every field of `settings`, in declaration order.

    Raises:
        ValueError: when a field has no alias (environment variable) or no description.
    """
    rows = [HEADER]
    for name, info in settings.model_fields.items():
        if not info.alias or not (info.description or "").strip():
            raise ValueError(f"setting {name} needs an alias and a description in config.py")
        meaning = " ".join((info.description or "").split()).replace("|", "\\|")
        cells = [f"`{info.alias}`", describe_type(info), describe_default(info), meaning]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def with_table(page: str, table: str) -> str:
    """`page` with the text between the markers replaced by `table`.

    Raises:
        ValueError: when the markers are missing or out of order.
    """
    start, end = page.find(START), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page needs the lines {START!r} and {END!r}, in that order")
    return page[: start + len(START)] + "\n" + table + "\n" + page[end:]


def command(
    write: Annotated[Path | None, typer.Option(help="Rewrite the table in this page.")] = None,
    check: Annotated[
        Path | None, typer.Option(help="Exit 1 when this page's table differs.")
    ] = None,
) -> None:
    """Print the settings table made from service/config.py (or write it into a page)."""
    table = render_table()
    path = write or check
    if path is None:
        typer.echo(table)
        return
    try:
        current = path.read_text(encoding="utf-8")
        wanted = with_table(current, table)
    except (OSError, ValueError) as exc:
        fail(exc, verbose=False)
    if write is not None:
        path.write_text(wanted, encoding="utf-8")
    elif wanted != current:
        typer.echo(
            f"{path}: the settings table differs from service/config.py; run `{REGENERATE}`.",
            err=True,
        )
        raise typer.Exit(code=1)
