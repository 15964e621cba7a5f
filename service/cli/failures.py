"""How every CLI command reports an error: the chain of causes as sentences, exit code 1."""

from __future__ import annotations

from typing import NoReturn

import typer


def fail(exc: BaseException, verbose: bool) -> NoReturn:
    """Print `exc` and its causes to stderr and exit 1; with `verbose`, re-raise instead."""
    causes: list[str] = []
    current: BaseException | None = exc
    while current is not None:
        causes.append(str(current) or type(current).__name__)
        current = current.__cause__
    typer.echo("error: " + "\n  caused by: ".join(causes), err=True)
    if verbose:
        raise exc
    raise typer.Exit(code=1)
