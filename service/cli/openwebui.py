"""`python -m service openwebui …` — install the filter and its companions into Open WebUI.

The typer commands only: the REST client is in openwebui_client.py, the function files in
openwebui_sources.py, the install/uninstall/status steps in openwebui_install.py and the
checks through Open WebUI in openwebui_checks.py. Every command's Open WebUI error becomes
one line on stderr and exit code 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from service.cli.openwebui_client import OpenWebUI, OpenWebUIError
from service.cli.openwebui_install import install, status, uninstall
from service.cli.openwebui_sources import SOURCE_DIR, read_sources
from service.config import Settings

__all__ = ["DEFAULT_URL", "app", "local_service_url", "service_url_of"]

app = typer.Typer(
    help="Install the memory filter and its companions into a running Open WebUI.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

Url = Annotated[str, typer.Option("--url", envvar="OPENWEBUI_URL", help="Open WebUI's address.")]
Token = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="OPENWEBUI_TOKEN",
        help="An admin's JWT or sk-… API key (Settings → Account, where an admin has allowed "
        "API keys); without one, give --email and --password.",
    ),
]
Email = Annotated[str | None, typer.Option("--email", help="Admin e-mail, instead of --token.")]
Password = Annotated[
    str | None,
    typer.Option("--password", envvar="OPENWEBUI_PASSWORD", help="Admin password, with --email."),
]
FilterFile = Annotated[Path, typer.Option("--filter-file", help="The filter's source file.")]
PipeFile = Annotated[Path, typer.Option("--pipe-file", help="The command pipe's source file.")]
EventsFile = Annotated[
    Path, typer.Option("--events-file", help="The Memory Events function's source file.")
]
ActionFile = Annotated[
    Path, typer.Option("--action-file", help="The Remember action's source file.")
]
ToolsFile = Annotated[Path, typer.Option("--tools-file", help="The Memory Tools' source file.")]
Verbose = Annotated[bool, typer.Option("-v", "--verbose", help="Show tracebacks.")]
DEFAULT_URL = "http://127.0.0.1:8080"


@app.command("install")
def install_command(
    url: Url = DEFAULT_URL,
    token: Token = None,
    email: Email = None,
    password: Password = None,
    service_url: Annotated[
        str | None,
        typer.Option(
            "--service-url",
            help="The memory service as Open WebUI's server reaches it (default: "
            "http://MEMORY_HOST:MEMORY_PORT of this machine's settings).",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key", help="The service's key (default: MEMORY_API_KEY or .state/api_key)."
        ),
    ] = None,
    make_global: Annotated[
        bool | None,
        typer.Option(
            "--global/--no-global",
            help="Run the filter for every model (default: yes, unless --model is given).",
        ),
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Attach the filter to this model (repeatable)."),
    ] = None,
    native_memory_off: Annotated[
        bool,
        typer.Option(
            "--native-memory-off",
            help="Also switch Open WebUI's built-in memory off for everyone.",
        ),
    ] = False,
    tools_model: Annotated[
        list[str] | None,
        typer.Option(
            "--tools-model",
            help="Offer the Memory Tools (search, add, forget) to this model in every new "
            "chat; for models that call tools (repeatable).",
        ),
    ] = None,
    filter_file: FilterFile = SOURCE_DIR / "memory_filter.py",
    pipe_file: PipeFile = SOURCE_DIR / "memory_commands.py",
    events_file: EventsFile = SOURCE_DIR / "memory_events.py",
    action_file: ActionFile = SOURCE_DIR / "memory_action.py",
    tools_file: ToolsFile = SOURCE_DIR / "memory_tools.py",
    verbose: Verbose = False,
) -> None:
    """Install or update the filter, the command pipe, the events function, the Remember
    action and the Memory Tools, switch them on, set the valves, then check through Open
    WebUI that the filter reaches the service.
    """
    model_ids = list(dict.fromkeys(model or []))
    with _session(url, token, email, password, verbose) as owui:
        key = api_key or _local_api_key()
        if not key:
            raise OpenWebUIError(
                "no API key for the memory service: pass --api-key, set "
                "MEMORY_API_KEY, or start the service once (it writes "
                ".state/api_key)"
            )
        install(
            owui,
            sources=read_sources(filter_file, pipe_file, events_file, action_file, tools_file),
            service_url=(service_url or local_service_url()).rstrip("/"),
            api_key=key,
            make_global=make_global if make_global is not None else not model_ids,
            model_ids=model_ids,
            native_memory_off=native_memory_off,
            tools_model_ids=list(tools_model or []),
        )


@app.command("uninstall")
def uninstall_command(
    url: Url = DEFAULT_URL,
    token: Token = None,
    email: Email = None,
    password: Password = None,
    verbose: Verbose = False,
) -> None:
    """Delete the functions, the Memory Tools and the pipe's model row; detach the filter
    and the tools from models.
    """
    with _session(url, token, email, password, verbose) as owui:
        uninstall(owui)


@app.command("status")
def status_command(
    url: Url = DEFAULT_URL,
    token: Token = None,
    email: Email = None,
    password: Password = None,
    filter_file: FilterFile = SOURCE_DIR / "memory_filter.py",
    pipe_file: PipeFile = SOURCE_DIR / "memory_commands.py",
    events_file: EventsFile = SOURCE_DIR / "memory_events.py",
    action_file: ActionFile = SOURCE_DIR / "memory_action.py",
    tools_file: ToolsFile = SOURCE_DIR / "memory_tools.py",
    verbose: Verbose = False,
) -> None:
    """Show what is installed and active, whether the installed code is current, and check
    through Open WebUI that the filter reaches the service with its key.
    """
    with _session(url, token, email, password, verbose) as owui:
        status(
            owui,
            sources=read_sources(filter_file, pipe_file, events_file, action_file, tools_file),
        )


@contextmanager
def _session(
    url: str, token: str | None, email: str | None, password: str | None, verbose: bool
) -> Iterator[OpenWebUI]:
    """An admin session for one command; its errors become one line on stderr and exit 1."""
    try:
        owui = OpenWebUI.connect(url, token=token, email=email, password=password)
        try:
            yield owui
        finally:
            owui.close()
    except OpenWebUIError as exc:
        typer.echo(f"error: {exc}", err=True)
        if verbose:
            raise
        raise typer.Exit(code=1) from exc


def local_service_url() -> str:
    """`http://MEMORY_HOST:MEMORY_PORT` of this machine's settings (what `serve` binds); a
    wildcard host becomes 127.0.0.1 (Open WebUI on another machine needs --service-url).
    """
    try:
        settings = Settings()
    except Exception:
        return "http://127.0.0.1:8765"
    return service_url_of(settings.host, settings.port)


def service_url_of(host: str, port: int) -> str:
    """The URL a local client reaches a service bound to `host:port` at."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _local_api_key() -> str | None:
    """The local service's key, if one is configured or was generated; never creates one."""
    try:
        settings = Settings()
    except Exception:
        return None
    if settings.api_key is not None and settings.api_key.get_secret_value():
        return settings.api_key.get_secret_value()
    path = settings.state_dir / "api_key"
    if not path.exists():
        return None
    return path.read_text(encoding="utf-8").strip() or None
