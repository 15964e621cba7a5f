"""`python -m service openwebui import-memories` — bring one account's memories of Open
WebUI's built-in Memory feature over, from the command line.

Open WebUI 0.12.4 lets each account read only its own memories over REST
(`GET /api/v1/memories/` filters by the caller; no route returns another user's, an admin's
included), so this signs in as the account whose memories it imports (`--email`,
`--password`, or `--token`), reads them and writes them into that user's Personal bank in the
service's database, tagged `import:openwebui`, with their own dates, deduplicated (a second
run adds nothing). For every user at once without their passwords, each user types
`/memory import openwebui` in a chat: the filter reads the table inside Open WebUI.

Exit codes: 0 done, 1 an error (Open WebUI unreachable or refusing, Memory feature off).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from service.cli import memories as memories_cli
from service.cli.failures import fail
from service.cli.openwebui import DEFAULT_URL, Url, Verbose
from service.cli.openwebui_client import OpenWebUI, OpenWebUIError
from service.config import Settings
from service.core.commands import counted
from service.errors import MemoryServiceError
from service.flows import import_command, imports

__all__ = ["import_memories_command", "read_account_memories"]

Token = Annotated[
    str | None,
    typer.Option("--token", envvar="OPENWEBUI_TOKEN", help="The account's JWT or sk-… API key."),
]
Email = Annotated[
    str | None, typer.Option("--email", help="E-mail of the account whose memories to import.")
]
Password = Annotated[
    str | None,
    typer.Option("--password", envvar="OPENWEBUI_PASSWORD", help="Its password, with --email."),
]


def read_account_memories(
    url: str, *, token: str | None, email: str | None, password: str | None
) -> tuple[str, list[tuple[str, datetime, datetime]]]:
    """(user id, [(content, created_at, updated_at)]) of the account that signs in.

    Raises:
        OpenWebUIError: unreachable, not Open WebUI, sign-in refused, Memory feature off.
    """
    owui = OpenWebUI.sign_in(url, token=token, email=email, password=password, whose="the account")
    try:
        me = owui.call("GET", "/api/v1/auths/")
        try:
            rows: Any = owui.call("GET", "/api/v1/memories/")
        except OpenWebUIError as exc:
            if " 404 " in str(exc) or " 403 " in str(exc):
                raise OpenWebUIError(
                    f"Open WebUI's Memory feature is off or not allowed for this account ({exc})"
                ) from exc
            raise
    finally:
        owui.close()
    found = []
    for row in rows or []:
        content = str(row.get("content") or "").strip()
        if not content:
            continue
        try:
            created = datetime.fromtimestamp(float(row.get("created_at") or 0), UTC)
            updated = datetime.fromtimestamp(float(row.get("updated_at") or 0), UTC)
        except (OverflowError, ValueError, OSError):
            created = updated = datetime.now(UTC)  # a date Open WebUI cannot have written
        found.append((content, created, max(created, updated)))
    return str(me["id"]), found


def import_memories_command(
    url: Url = DEFAULT_URL,
    token: Token = None,
    email: Email = None,
    password: Password = None,
    verbose: Verbose = False,
) -> None:
    """Import the signed-in account's Open WebUI memories into its Personal bank."""
    try:
        user_id, rows = read_account_memories(url, token=token, email=email, password=password)
    except OpenWebUIError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None

    async def write() -> imports.ImportReport:
        async with memories_cli._runtime(Settings()) as rt:
            return await import_command.import_openwebui(
                rt,
                cell_for=imports.user_cell(user_id),
                memories=rows,
                actor="cli:openwebui-import",
            )

    try:
        report = asyncio.run(write())
    except MemoryServiceError as exc:
        fail(exc, verbose)
    typer.echo(
        f"{user_id}: {counted(len(rows), 'Open WebUI memory', 'Open WebUI memories')}; "
        f"added {len(report.added)}, "
        f"{report.duplicates} already stored, {report.refused} refused by the guards"
    )
