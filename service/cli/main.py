"""`python -m service …` — the service's command line."""

from __future__ import annotations

import asyncio
import logging

import typer

from service.cli import (
    cli_reference,
    doctor,
    local_llm,
    memories,
    openwebui,
    openwebui_assistants,
    openwebui_memories,
    settings_table,
    summarize,
    turns,
    worker,
)
from service.cli import eval as eval_cli
from service.cli.failures import fail
from service.config import Settings
from service.errors import MemoryServiceError

app = typer.Typer(
    help="Memory service for Open WebUI.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


FILTER_HELP = """
Memory service starting on {url} (ready when GET /readyz answers 200)
  API key: {key}
Install into Open WebUI with one command (filter, /memory commands pipe, events, the
Remember button, valves, then a check through Open WebUI that the filter reaches this
service with the key):
  .venv/bin/python -m service openwebui install \\
      --url <your Open WebUI URL, e.g. http://127.0.0.1:8080> \\
      --service-url {url} --email <admin e-mail> --password <admin password>
(Replace each <…>: --url is the address of your Open WebUI, 8080 being only its default
port. --service-url is this service as Open WebUI's server reaches it; change it when Open
WebUI runs on another machine or in a container.)
By hand: README.md, "Install the filter into Open WebUI".
"""
#: What the banner says instead of a key it did not just generate (a key is a secret: it is
#: shown once, when it is made, and never again in a log that may be kept or shared).
KEY_HINTS = {
    "environment": "from MEMORY_API_KEY (not shown)",
    "state_dir": "in {path} (not shown; print it with `python -m service api-key`)",
}


def start_banner(settings: Settings) -> str:
    """The text `serve` prints on start; the key itself only when it was just generated."""
    key, origin = settings.bearer_key_origin()
    shown = key if origin == "generated" else KEY_HINTS[origin]
    shown = shown.format(path=settings.state_dir / "api_key")
    return FILTER_HELP.format(url=openwebui.service_url_of(settings.host, settings.port), key=shown)


@app.command()
def serve(
    host: str | None = typer.Option(None, help="Address to bind (default MEMORY_HOST)."),
    port: int | None = typer.Option(None, help="Port (default MEMORY_PORT)."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Tracebacks and debug logs."),
) -> None:
    """Run the API and, unless MEMORY_RUN_WORKERS=false, the job workers in a `worker` process
    it starts and stops with itself (in this process with MEMORY_WORKER_PROCESS=false);
    embedded PostgreSQL unless DATABASE_URL is set.
    """
    import uvicorn

    from service.api.app import create_app

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:  # the embedded server logs every pg_ctl call it makes
        logging.getLogger("pgserver").setLevel(logging.WARNING)
    try:
        overrides = {k: v for k, v in {"MEMORY_HOST": host, "MEMORY_PORT": port}.items() if v}
        settings = Settings(**overrides)  # type: ignore[arg-type]
        settings.check_bind()
        banner = start_banner(settings)  # before create_app, which may generate the key
        api = create_app(settings)
        typer.echo(banner)
        uvicorn.run(
            api,
            host=settings.host,
            port=settings.port,
            log_level="info",
            timeout_graceful_shutdown=10,
        )
    except MemoryServiceError as exc:
        fail(exc, verbose)


@app.command()
def migrate(
    to: str = typer.Option(
        "head",
        "--to",
        metavar="REVISION",
        help="Migrate up or down to this revision (an id such as 0012, head, or base = empty); "
        "back up with pg_dump first (docs/howto/deploy.md, 'Upgrading and rolling back').",
    ),
    verbose: bool = typer.Option(False, "-v", "--verbose"),
) -> None:
    """Apply database migrations (or go back to an older revision) and exit."""
    from service import bootstrap

    async def run(settings: Settings) -> tuple[str, str | None]:
        async with bootstrap.database_url(settings) as url:
            return await bootstrap.migrate_to(bootstrap.direct_url(settings, url), to)

    try:
        done, revision = asyncio.run(run(Settings()))
    except MemoryServiceError as exc:
        fail(exc, verbose)
    if to == "head":
        typer.echo(f"database is at the newest migration, {revision} ({done})")
    else:
        typer.echo(f"database is at migration {revision or 'base (empty)'} ({done})")


@app.command("api-key")
def api_key() -> None:
    """Print the API key the filter must use."""
    typer.echo(Settings().bearer_key())


openwebui.app.command("import-memories")(openwebui_memories.import_memories_command)
openwebui.app.command("assistant-memory")(openwebui_assistants.assistant_memory_command)
app.add_typer(openwebui.app, name="openwebui")
app.command("summarize")(summarize.summarize)
app.command("restore")(summarize.restore)
app.command("doctor")(doctor.doctor)
app.command("worker")(worker.worker)
app.add_typer(turns.app, name="turns")
app.command("eval")(eval_cli.evaluate_command)
app.add_typer(memories.app, name="memories")
app.command("settings-table")(settings_table.command)
app.command("cli-reference")(cli_reference.command)
app.command("local-llm")(local_llm.local_llm_command)


def main() -> None:  # pragma: no cover
    """Entry point of the `memory-service` console script."""
    app(prog_name="memory-service")


if __name__ == "__main__":  # pragma: no cover
    main()
