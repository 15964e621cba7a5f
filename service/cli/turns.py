"""`python -m service turns …` — failed turns of a running service: list them, retry them.

Both commands talk to the running service's admin API (`GET /v1/admin/turns`,
`POST /v1/admin/turns/{id}/retry`) with this machine's API key, so the service's own workers
do the extraction. Message texts are never printed.
"""

from __future__ import annotations

import httpx
import typer

from service.config import Settings
from service.core.commands import counted

__all__ = ["app"]

app = typer.Typer(help="Failed turns of a running service: list and retry.", no_args_is_help=True)

PAGE = 200


def _client(url: str | None, timeout_s: float) -> httpx.Client:
    settings = Settings()
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    base = (url or f"http://{host}:{settings.port}").rstrip("/")
    return httpx.Client(
        base_url=base,
        timeout=timeout_s,
        trust_env=False,
        headers={"Authorization": f"Bearer {settings.bearer_key()}"},
    )


def _failed(client: httpx.Client, limit: int) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    while len(items) < limit:
        page = client.get(
            "/v1/admin/turns",
            params={
                "status": "failed",
                "limit": min(PAGE, limit - len(items)),
                "offset": len(items),
            },
        )
        page.raise_for_status()
        batch = page.json()["items"]
        items.extend(batch)
        if len(batch) < PAGE:
            break
    return items


URL = typer.Option(None, "--url", help="The service (default: MEMORY_HOST and MEMORY_PORT).")
TIMEOUT = typer.Option(10.0, "--timeout-s", min=0.5, help="Limit of each call, in seconds.")


@app.command("list")
def list_failed(
    url: str | None = URL,
    limit: int = typer.Option(50, min=1, max=10_000),
    timeout_s: float = TIMEOUT,
) -> None:
    """Print the failed turns, newest first: id, sender, chat, whether a retry can run, error."""
    try:
        with _client(url, timeout_s) as client:
            items = _failed(client, limit)
    except httpx.HTTPError as exc:
        typer.echo(f"error: the service did not answer: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    for t in items:
        typer.echo(
            f"{t['id']}\t{t['user_id']}\t{t['chat_id']}\t"
            f"{'retryable' if t['retryable'] else 'texts erased'}\t{t['error'] or ''}"
        )
    typer.echo(f"{len(items)} failed turns")


@app.command("retry-failed")
def retry_failed(
    url: str | None = URL,
    turn_id: list[int] = typer.Option(  # noqa: B008 - typer declares options so
        [], "--id", help="Only these turns (repeatable); default: every retryable."
    ),
    limit: int = typer.Option(1_000, min=1, max=100_000, help="Most turns queued again."),
    timeout_s: float = TIMEOUT,
) -> None:
    """Queue failed turns again (e.g. after an LLM outage); each is extracted once."""
    try:
        with _client(url, timeout_s) as client:
            ids = turn_id or [int(str(t["id"])) for t in _failed(client, limit) if t["retryable"]]
            queued = skipped = 0
            for one in ids[:limit]:
                answer = client.post(f"/v1/admin/turns/{one}/retry")
                if answer.status_code == 202:
                    queued += 1
                else:
                    skipped += 1
                    typer.echo(
                        f"{one}: {answer.json().get('detail', answer.status_code)}", err=True
                    )
    except httpx.HTTPError as exc:
        typer.echo(f"error: the service did not answer: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    typer.echo(f"{counted(queued, 'turn', 'turns')} queued again, {skipped} skipped")
    raise typer.Exit(code=1 if skipped and not queued else 0)
