"""`python -m service openwebui assistant-memory <model-id> [--off]` — give a workspace model
(an assistant) its own memory, or take it back.

It adds (or removes) the tag `own-memory` on the model's row, which is what an admin would do
by hand in Workspace → Models → the model → Tags; the filter reads the tag from the model on
every turn (`__model__["info"]["meta"]["tags"]`), then asks Open WebUI to rebuild its model
list so the next turn sees it. Chats with a marked model read and write only each user's
memory for that model (DESIGN §3, Assistant Memory). The filter's `assistant_memory_models`
valve marks models too (by id or `prefix*`), for provider models without a workspace row.

Exit codes: 0 done (or nothing to change), 1 an error (Open WebUI unreachable or refusing,
no such model row).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from service.cli.openwebui import (
    DEFAULT_URL,
    Email,
    Password,
    Token,
    Url,
    Verbose,
    _session,
)
from service.cli.openwebui_client import OpenWebUI, OpenWebUIError, model_form

__all__ = ["OWN_MEMORY_TAG", "assistant_memory_command", "set_own_memory"]

OWN_MEMORY_TAG = "own-memory"
"""The tag the filter looks for (filter/memory_filter.py OWN_MEMORY_TAG; a test keeps them
equal)."""


def _is_own_memory(tag: Any) -> bool:
    return isinstance(tag, dict) and str(tag.get("name", "")).strip().lower() == OWN_MEMORY_TAG


def set_own_memory(owui: OpenWebUI, model_id: str, *, on: bool) -> str:
    """Tag (or untag) the model row `model_id` and refresh Open WebUI's model list.

    Returns:
        One line saying what changed.

    Raises:
        OpenWebUIError: no model row with that id, or Open WebUI refused a call.
    """
    rows = owui.model_rows()
    row = rows.get(model_id)
    if row is None:
        known = ", ".join(sorted(rows)[:20]) or "none"
        raise OpenWebUIError(
            f"Open WebUI has no workspace model {model_id!r} (create the assistant in "
            f"Workspace → Models first; model rows: {known})"
        )
    meta = dict(row.get("meta") or {})
    tags = [t for t in meta.get("tags") or [] if isinstance(t, dict)]
    marked = any(_is_own_memory(t) for t in tags)
    name = row.get("name") or model_id
    if marked == on:
        return f"{name} ({model_id}) {'already keeps' if on else 'does not keep'} its own memory"
    kept = [t for t in tags if not _is_own_memory(t)]
    meta["tags"] = [*kept, {"name": OWN_MEMORY_TAG}] if on else kept
    owui.call("POST", "/api/v1/models/model/update", json=model_form(row, meta))
    owui.provider_models()  # rebuilds the model list the filter is handed on the next turn
    if on:
        return (
            f"{name} ({model_id}) now keeps its own memory: its chats read and write only "
            "each user's memory for it"
        )
    return (
        f"{name} ({model_id}) no longer keeps its own memory: its chats use the ordinary "
        "banks again (what users told it stays in its memory, unused until it is marked again)"
    )


def assistant_memory_command(
    model_id: Annotated[str, typer.Argument(help="Id of the workspace model (assistant).")],
    off: Annotated[
        bool, typer.Option("--off", help="Take its own memory back (remove the tag).")
    ] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
    email: Email = None,
    password: Password = None,
    verbose: Verbose = False,
) -> None:
    """Give a workspace model (an assistant) its own memory: chats with it read and write
    only each user's memory for it, never their Personal, Interaction Patterns, Project or
    Chat Memory (tags the model `own-memory`; `--off` removes the tag).
    """
    with _session(url, token, email, password, verbose) as owui:
        typer.echo(set_own_memory(owui, model_id, on=not off))
