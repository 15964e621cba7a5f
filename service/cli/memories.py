"""`python -m service memories export|import` — an admin moving or restoring one user's
memories (the same formats as `GET …/memories/export` and `POST …/memories/import`).

Both attach to the service's database (embedded in `MEMORY_STATE_DIR` unless `DATABASE_URL`
is set); `import` loads the embedding model to embed what it writes.

Exit codes: 0 done, 1 an error (a file that is not an export included), 2 wrong usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import typer

from service.cli.failures import fail
from service.config import Settings
from service.core.commands import counted
from service.errors import InvalidInput, MemoryServiceError
from service.flows import imports
from service.flows import memories as memory_flow
from service.flows.commands import export_json
from service.flows.runtime import Runtime

app = typer.Typer(help="Export or import one user's memories.", no_args_is_help=True)


@contextlib.asynccontextmanager
async def _runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """The service's parts as a service process has them: the installation's short ids (so
    an export shows the ids users see) and the job queue open (an import asks for the
    user's core profile to be rewritten).
    """
    from service import bootstrap
    from service.flows.ids import install_short_id_key

    async with bootstrap.database_url(settings) as url:
        await bootstrap.require_head(url)
        async with (
            bootstrap.open_runtime(settings, url=url, pool_size=2) as rt,
            rt.jobs.open_async(),
        ):
            await install_short_id_key(rt.db)
            yield rt


@app.command("export")
def export(
    user: str = typer.Option(..., "--user", metavar="ID", help="The Open WebUI user id."),
    folder: str | None = typer.Option(
        None, "--folder", metavar="ID", help="Also this folder's Project Memory."
    ),
    markdown: bool = typer.Option(False, "--markdown", help="A document to read, not JSON."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Tracebacks and debug logs."),
) -> None:
    """Print the user's memories as JSON (to import again) or Markdown on stdout."""

    async def read() -> str:
        async with _runtime(Settings()) as rt:
            rows = await memory_flow.export_for_user(rt, user_id=user, folder_id=folder)
        if markdown:
            return imports.export_markdown(rows)
        return json.dumps(export_json(rows), ensure_ascii=False, indent=2)

    try:
        typer.echo(asyncio.run(read()))
    except MemoryServiceError as exc:
        fail(exc, verbose)


@app.command("import")
def import_(
    file: Path = typer.Argument(  # noqa: B008 - typer declares arguments this way
        ..., metavar="FILE", help="A JSON export ('-' reads stdin)."
    ),
    user: str = typer.Option(..., "--user", metavar="ID", help="The Open WebUI user id."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would be added only."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Tracebacks and debug logs."),
) -> None:
    """Restore a JSON export into the user's banks; what is already stored is skipped, so
    running it twice adds nothing the second time.
    """
    try:
        raw = typer.get_text_stream("stdin").read() if str(file) == "-" else file.read_text()
    except OSError as exc:
        typer.echo(f"error: cannot read {file}: {exc.strerror}", err=True)
        raise typer.Exit(code=2) from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        typer.echo(f"error: {file} is not JSON (line {exc.lineno}: {exc.msg})", err=True)
        raise typer.Exit(code=1) from None

    async def restore() -> imports.RestoreReport:
        async with _runtime(Settings()) as rt:
            return await imports.restore_export(
                rt, user_id=user, data=data, actor="cli:import", dry_run=dry_run
            )

    try:
        result = asyncio.run(restore())
    except InvalidInput as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    except MemoryServiceError as exc:
        fail(exc, verbose)
    counts = result.as_json()
    verb = "would add" if dry_run else "added"
    added = counted(counts["would_add" if dry_run else "added"], "memory", "memories")
    typer.echo(
        f"{user}: {verb} {added}; {counts['duplicates']} already stored, "
        f"{counts['refused']} refused by the guards, {counts['history_skipped']} older versions "
        f"and {counts['chat_memory_skipped']} Chat Memory not restored"
        + (
            f"; {counts['over_cap']} not written: past MEMORY_CAP (raise it to restore them)"
            if counts["over_cap"]
            else ""
        )
    )
