"""`python -m service doctor` — check what the service needs, one verdict line per check.

    OK   database: PostgreSQL 16.4 (embedded in .state/pgdata)
    OK   pgvector: version 0.6.0
    OK   migrations: at the newest revision (0005)
    OK   embedding model: all-MiniLM-L6-v2 (onnx), 384 dimensions, one sentence in 7 ms
    WARN llm: no LLM configured (LLM_BASE_URL, LLM_MODEL): turns are kept and wait
    FAIL open webui: http://127.0.0.1:8080/health did not answer: connection refused
    WARN filter → service: not checked: give --email and --password (or --token) of an …

When a service answers at `--service-url` (default: the URL this shell's MEMORY_HOST and
MEMORY_PORT give), doctor checks that running service instead of this shell's environment: its
`/readyz` and, with its API key (`--api-key`, MEMORY_API_KEY or the state folder's key), its
`/v1/status`, which name its LLM, its database and why turns wait. Its first line says which
one it checked; `--local` checks this shell's environment even when a service answers.

Otherwise it uses the service's own settings (the same environment variables), reads but never
writes the database, sends one tiny completion to the LLM and one GET to Open WebUI, each
within `--timeout-s`. Nothing secret is printed. Exit code 1 when any check FAILs, else 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import typer

from service.config import Settings
from service.core.commands import counted
from service.errors import MemoryServiceError

__all__ = ["AdminLogin", "Verdict", "doctor", "run_checks"]

OK, WARN, FAIL = "OK", "WARN", "FAIL"
PGVECTOR_MIN = (0, 5)
"""Oldest pgvector the service's SQL is written for (cosine distance, untyped vector columns)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one check."""

    level: str  #: OK, WARN or FAIL
    check: str  #: what was checked
    sentence: str  #: what was found, in one sentence

    def line(self) -> str:
        """The verdict as doctor prints it: level, check, sentence."""
        return f"{self.level:<4} {self.check}: {self.sentence}"


def _causes(exc: BaseException) -> str:
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 4:
        text = str(current).strip().splitlines()[0] if str(current).strip() else ""
        parts.append(text or type(current).__name__)
        current = current.__cause__
    return "; ".join(dict.fromkeys(parts))


def _where(url: str) -> str:
    """host:port/database of a URL, without user or password."""
    parts = urlsplit(url)
    host = parts.hostname or "local socket"
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}{parts.path}"


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2] if p.isdigit())


async def _check_database(
    settings: Settings, timeout_s: float, stack: contextlib.AsyncExitStack
) -> tuple[list[Verdict], Any]:
    """Verdicts for the database, pgvector and migrations, and the Database when reachable;
    an embedded server started here runs until `stack` closes.
    """
    from service import bootstrap
    from service.flows import diagnostics

    try:
        url = await stack.enter_async_context(bootstrap.database_url(settings))
    except MemoryServiceError as exc:
        return [Verdict(FAIL, "database", _causes(exc))], None
    if settings.database_url:
        where = f"DATABASE_URL {_where(settings.database_url)}"
    else:
        where = f"embedded in {settings.state_dir / 'pgdata'}"
    db = diagnostics.connect(url)
    try:
        async with asyncio.timeout(timeout_s):
            facts = await diagnostics.database_facts(db)
    except Exception as exc:
        await db.dispose()
        return (
            [Verdict(FAIL, "database", f"cannot connect ({where}): {_causes(exc)}")],
            None,
        )
    verdicts = [Verdict(OK, "database", f"PostgreSQL {facts.server_version} ({where})")]
    if facts.pgvector_version is None and facts.pgvector_available is None:
        verdicts.append(
            Verdict(
                FAIL,
                "pgvector",
                "the vector extension is not available on this server; install pgvector",
            )
        )
    elif facts.pgvector_version is None:
        verdicts.append(
            Verdict(
                WARN,
                "pgvector",
                f"version {facts.pgvector_available} is "
                "available but not installed yet; the migrations install it",
            )
        )
    elif _version_tuple(facts.pgvector_version) < PGVECTOR_MIN:
        verdicts.append(
            Verdict(
                FAIL,
                "pgvector",
                f"version {facts.pgvector_version} is too old; 0.5 or newer is needed",
            )
        )
    else:
        verdicts.append(Verdict(OK, "pgvector", f"version {facts.pgvector_version}"))
    try:
        at_head = await asyncio.wait_for(bootstrap.is_at_head(url), timeout_s)
        head = bootstrap.head_revision()
        verdicts.append(
            Verdict(OK, "migrations", f"at the newest revision ({head})")
            if at_head
            else Verdict(
                WARN,
                "migrations",
                "behind the newest revision; the service applies them "
                "when it starts (or run `python -m service migrate`)",
            )
        )
    except Exception as exc:
        verdicts.append(Verdict(FAIL, "migrations", f"cannot read the revision: {_causes(exc)}"))
    return verdicts, db


async def _check_turns(db: Any) -> Verdict:
    """Turns whose extraction failed for good ("parked"): an admin's to retry."""
    from service.flows import diagnostics

    try:
        counts = await diagnostics.turn_counts(db)
    except Exception:  # no tables yet (migrations not applied): no turns either
        return Verdict(OK, "turns", "none stored yet")
    if counts["failed"]:
        return Verdict(
            WARN,
            "turns",
            f"{counts['failed']} failed extraction for good; "
            "`python -m service turns list`, then `turns retry-failed`",
        )
    return Verdict(OK, "turns", f"{counts['queued']} waiting, none failed")


async def _check_embeddings(settings: Settings, db: Any) -> list[Verdict]:
    from service import bootstrap
    from service.flows import diagnostics

    try:
        encoder = await asyncio.to_thread(bootstrap.build_encoder, settings)
    except Exception as exc:
        return [Verdict(FAIL, "embedding model", f"does not load: {_causes(exc)}")]
    try:
        started = time.perf_counter()
        vector = await encoder.encode_one("The user keeps two beehives in the garden.")
        took_ms = (time.perf_counter() - started) * 1000
        verdicts = [
            Verdict(
                OK,
                "embedding model",
                f"{encoder.model_name} ({encoder.backend}), {vector.shape[0]} "
                f"dimensions, one sentence in {took_ms:.0f} ms",
            )
        ]
        if db is not None:
            try:
                in_use = await diagnostics.vector_models(db)
            except Exception:  # no tables yet (migrations not applied): nothing stored
                in_use = {}
            others = {m: n for m, n in in_use.items() if m != encoder.model_name}
            if others:
                named = ", ".join(f"{n} by {m or 'no model yet'}" for m, n in others.items())
                verdicts.append(
                    Verdict(
                        WARN,
                        "stored vectors",
                        f"{named}: the service "
                        "re-embeds them in the background when it starts; "
                        "keyword search finds them meanwhile",
                    )
                )
        return verdicts
    except MemoryServiceError as exc:
        return [Verdict(FAIL, "embedding model", _causes(exc))]
    finally:
        encoder.close()


async def _check_llm(settings: Settings, timeout_s: float) -> list[Verdict]:
    from service import bootstrap
    from service.flows.diagnostics import llm_json

    if not settings.llm_configured:
        return [
            Verdict(
                WARN,
                "llm",
                "no LLM configured (LLM_BASE_URL, LLM_MODEL): turns are "
                "kept and wait; everything else works",
            )
        ]
    base = settings.llm_base_url or ""
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    verdicts: list[Verdict] = []
    try:
        async with httpx.AsyncClient(timeout=timeout_s, headers=headers, trust_env=False) as http:
            response = await http.get(f"{base}/models")
        if response.status_code in (401, 403):
            return [
                Verdict(
                    FAIL,
                    "llm",
                    f"{base}/models refused the key "
                    f"(HTTP {response.status_code}); check LLM_API_KEY",
                )
            ]
        if response.status_code == 200:
            ids = [
                str(m.get("id")) for m in (response.json().get("data") or []) if isinstance(m, dict)
            ]
            if settings.llm_model in ids:
                verdicts.append(Verdict(OK, "llm models", f"{base} lists {settings.llm_model}"))
            else:
                verdicts.append(
                    Verdict(
                        WARN,
                        "llm models",
                        f"{base} does not list {settings.llm_model} ({len(ids)} models listed)",
                    )
                )
        else:
            verdicts.append(
                Verdict(
                    WARN,
                    "llm models",
                    f"{base}/models answered HTTP "
                    f"{response.status_code} (some servers have no model list)",
                )
            )
    except (httpx.HTTPError, ValueError) as exc:
        return [Verdict(FAIL, "llm", f"{base} is unreachable: {_causes(exc)}")]
    # the service's client, within the doctor's own limit per call
    client = bootstrap.build_llm(
        settings.model_copy(update={"llm_timeout_s": min(timeout_s, settings.llm_timeout_s)})
    )
    try:
        started = time.perf_counter()
        answer = await client.complete(
            [
                {"role": "system", "content": "Answer with one JSON object and nothing else."},
                {"role": "user", "content": 'Reply with {"ok": true}.'},
            ],
            json_answer=True,
            max_tokens=20,
        )
        took_s = time.perf_counter() - started
        try:
            llm_json(answer)
            verdicts.append(
                Verdict(
                    OK, "llm", f"{settings.llm_model} answered a JSON request in {took_s:.1f} s"
                )
            )
        except MemoryServiceError:
            verdicts.append(
                Verdict(
                    WARN,
                    "llm",
                    f"{settings.llm_model} answered, but not with "
                    "JSON; extraction will repair or retry (LLM_JSON_MODE)",
                )
            )
    except MemoryServiceError as exc:
        verdicts.append(Verdict(FAIL, "llm", _causes(exc)))
    finally:
        await client.aclose()
    return verdicts


async def _check_openwebui(url: str, timeout_s: float) -> Verdict:
    health = f"{url.rstrip('/')}/health"
    try:
        async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
            response = await client.get(health)
    except httpx.HTTPError as exc:
        return Verdict(FAIL, "open webui", f"{health} did not answer: {_causes(exc)}")
    try:
        healthy = response.status_code == 200 and response.json().get("status") is True
    except ValueError:
        healthy = False
    if healthy:
        return Verdict(OK, "open webui", f"{health} answers")
    return Verdict(
        FAIL,
        "open webui",
        f"{health} answered HTTP {response.status_code}, not Open WebUI's health answer",
    )


def _check_bind(settings: Settings) -> Verdict:
    try:
        settings.check_bind()
    except MemoryServiceError as exc:
        return Verdict(FAIL, "listen address", str(exc))
    key = (
        "set"
        if settings.api_key and settings.api_key.get_secret_value()
        else "generated into the state folder"
    )
    return Verdict(OK, "listen address", f"{settings.host}:{settings.port}, API key {key}")


async def run_checks(
    settings: Settings,
    *,
    openwebui_url: str | None,
    timeout_s: float,
    admin: AdminLogin | None = None,
) -> list[Verdict]:
    """Every check, in order; none raises (a failure is a FAIL verdict).

    Args:
        openwebui_url: Open WebUI's base URL as this machine reaches it; None skips the check.
        timeout_s: limit of each network call (database, LLM, Open WebUI), in seconds.
        admin: an Open WebUI admin's login; with it, a /memory command goes through Open
            WebUI to check that its filter reaches the service with the right key.
    """
    verdicts = [_check_bind(settings)]
    db = None
    async with contextlib.AsyncExitStack() as stack:  # the embedded server, if one started
        try:
            found, db = await _check_database(settings, timeout_s, stack)
            verdicts += found
        except Exception as exc:
            verdicts.append(Verdict(FAIL, "database", f"the check itself failed: {_causes(exc)}"))
        if db is not None:
            verdicts.append(await _check_turns(db))
        try:
            verdicts += await _check_embeddings(settings, db)
        except Exception as exc:
            verdicts.append(
                Verdict(FAIL, "embedding model", f"the check itself failed: {_causes(exc)}")
            )
        finally:
            if db is not None:
                await db.dispose()
    try:
        verdicts += await _check_llm(settings, timeout_s)
    except Exception as exc:
        verdicts.append(Verdict(FAIL, "llm", f"the check itself failed: {_causes(exc)}"))
    return verdicts + await _check_openwebui_side(openwebui_url, timeout_s, admin)


async def _check_openwebui_side(
    openwebui_url: str | None, timeout_s: float, admin: AdminLogin | None
) -> list[Verdict]:
    """Open WebUI's health and, with an admin's login, the filter's and action's paths."""
    verdicts: list[Verdict] = []
    if openwebui_url:
        verdicts.append(await _check_openwebui(openwebui_url, timeout_s))
        verdicts.append(await asyncio.to_thread(_check_filter_path, openwebui_url, admin))
        if admin is not None and admin.given:
            verdicts.append(await asyncio.to_thread(_check_action_path, openwebui_url, admin))
    return verdicts


@dataclass(frozen=True, slots=True)
class AdminLogin:
    """How doctor signs in to Open WebUI: a token, or an e-mail and password."""

    token: str | None = None
    email: str | None = None
    password: str | None = None

    @property
    def given(self) -> bool:
        """True when a token, or both an e-mail and a password, were given."""
        return bool(self.token or (self.email and self.password))


def _check_filter_path(url: str, admin: AdminLogin | None) -> Verdict:
    """A /memory command typed through Open WebUI as the admin: the filter calls the service
    from where Open WebUI runs, with its valves (service/cli/openwebui_checks.py).
    """
    from service.cli.openwebui_checks import check_through_openwebui, probe_model
    from service.cli.openwebui_client import OpenWebUI, OpenWebUIError

    if admin is None or not admin.given:
        return Verdict(
            WARN,
            "filter → service",
            "not checked: give --email and --password (or --token) of an Open WebUI admin "
            "to check that the filter reaches this service with the right key",
        )
    try:
        owui = OpenWebUI.connect(url, token=admin.token, email=admin.email, password=admin.password)
    except OpenWebUIError as exc:
        return Verdict(FAIL, "filter → service", str(exc))
    try:
        model = probe_model(owui)
        if model is None:
            return Verdict(
                FAIL,
                "filter → service",
                "the memory filter is not installed or runs for no model "
                "(python -m service openwebui install)",
            )
        return Verdict(OK, "filter → service", check_through_openwebui(owui, model))
    except OpenWebUIError as exc:
        return Verdict(FAIL, "filter → service", str(exc))
    finally:
        owui.close()


def configured_service_url(settings: Settings) -> str:
    """The URL a service started with these settings listens on, as this machine reaches it."""
    host = settings.host if settings.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    return f"http://{f'[{host}]' if ':' in host else host}:{settings.port}"


def _known_key(settings: Settings) -> str | None:
    """The API key from the environment or the state folder; never generates one."""
    if settings.api_key is not None and settings.api_key.get_secret_value():
        return settings.api_key.get_secret_value()
    path = settings.state_dir / "api_key"
    return path.read_text(encoding="utf-8").strip() if path.exists() else None


async def check_running_service(
    url: str, *, api_key: str | None, timeout_s: float
) -> list[Verdict] | None:
    """Verdicts read from the service running at `url` (`/readyz`, `/v1/status`), or None
    when nothing answers there.
    """
    base = url.rstrip("/")
    async with httpx.AsyncClient(base_url=base, timeout=timeout_s, trust_env=False) as client:
        try:
            ready = await client.get("/readyz")
        except httpx.HTTPError:
            return None
        try:
            readiness = ready.json()
        except ValueError:
            readiness = {}
        if not isinstance(readiness, dict) or "status" not in readiness:
            return [Verdict(FAIL, "service", f"{base}/readyz answered, but not as this service")]
        if ready.status_code == 200:
            verdicts = [
                Verdict(
                    OK, "service", f"{base} is ready (model {readiness.get('embedding_model')})"
                )
            ]
        else:
            detail = readiness.get("detail") or ""
            verdicts = [
                Verdict(FAIL, "service", f"{base} is {readiness['status']} {detail}".strip())
            ]
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            answer = await client.get("/v1/status", headers=headers)
        except httpx.HTTPError as exc:
            return [*verdicts, Verdict(FAIL, "service status", _causes(exc))]
    if answer.status_code == 401:
        return [
            *verdicts,
            Verdict(
                WARN,
                "service status",
                "not read: give the service's API key (--api-key or MEMORY_API_KEY)",
            ),
        ]
    if answer.status_code != 200:
        return [*verdicts, Verdict(FAIL, "service status", f"HTTP {answer.status_code}")]
    return verdicts + _status_verdicts(answer.json())


def _status_verdicts(status: dict[str, Any]) -> list[Verdict]:
    """The running service's LLM and database, from its /v1/status."""
    line = str(status.get("status", ""))
    if not status.get("llm_configured"):
        llm = Verdict(WARN, "service llm", f"the running service has no LLM configured: {line}")
    elif "the LLM" in line:
        llm = Verdict(
            FAIL,
            "service llm",
            f"{status.get('llm_model')} at {status.get('llm_endpoint')}: {line}",
        )
    else:
        llm = Verdict(
            OK, "service llm", f"{status.get('llm_model')} at {status.get('llm_endpoint')}: {line}"
        )
    pooler = status.get("database_pooler")
    database = Verdict(
        FAIL if status.get("turns_failed") else OK,
        "service database",
        f"{status.get('database')}"
        + (f" (pooler: {pooler})" if pooler and pooler != "none" else "")
        + f"; {counted(int(status.get('memories_active') or 0), 'memory', 'memories')}, "
        f"{counted(int(status.get('turns_queued') or 0), 'turn', 'turns')} waiting, "
        f"{status.get('turns_failed')} failed",
    )
    return [llm, database]


def doctor(
    openwebui_url: str | None = typer.Option(
        None,
        "--openwebui-url",
        metavar="URL",
        help="Also check that Open WebUI answers here (e.g. http://127.0.0.1:8080).",
    ),
    timeout_s: float = typer.Option(
        10.0, "--timeout-s", min=0.5, max=300, help="Limit of each network call, in seconds."
    ),
    token: str | None = typer.Option(
        None, "--token", envvar="OPENWEBUI_TOKEN", help="An Open WebUI admin's token."
    ),
    email: str | None = typer.Option(None, "--email", help="An Open WebUI admin's e-mail."),
    password: str | None = typer.Option(
        None, "--password", envvar="OPENWEBUI_PASSWORD", help="That admin's password."
    ),
    service_url: str | None = typer.Option(
        None,
        "--service-url",
        metavar="URL",
        help="Check the service running here (default: the URL of MEMORY_HOST and MEMORY_PORT, "
        "when a service answers there).",
    ),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        help="The running service's API key (default: MEMORY_API_KEY, or the state folder's).",
    ),
    local: bool = typer.Option(
        False, "--local", help="Check this shell's environment even when a service answers."
    ),
) -> None:
    """Check the database, pgvector, migrations, the embedding model, the LLM endpoint and
    (with --openwebui-url) Open WebUI, and with an admin's login that its filter reaches
    this service with the right key; one OK / WARN / FAIL line each, exit 1 on a FAIL.
    """
    try:
        settings = Settings()
    except ValueError as exc:  # pydantic's ValidationError: a variable has a wrong value
        typer.echo(Verdict(FAIL, "settings", " ".join(str(exc).split())[:300]).line())
        raise typer.Exit(code=1) from exc
    admin = AdminLogin(token, email, password)
    target = service_url or configured_service_url(settings)
    running = (
        None
        if local
        else asyncio.run(
            check_running_service(
                target, api_key=api_key or _known_key(settings), timeout_s=timeout_s
            )
        )
    )
    if running is not None:
        typer.echo(f"checked: the service running at {target} (its /readyz and /v1/status)")
        verdicts = running + asyncio.run(_check_openwebui_side(openwebui_url, timeout_s, admin))
    elif service_url is not None and not local:
        typer.echo(f"checked: the service at {target} (--service-url)")
        verdicts = [Verdict(FAIL, "service", f"nothing answered at {target}")]
    else:
        why = "--local" if local else f"no service answered at {target}"
        typer.echo(f"checked: this shell's environment ({why})")
        verdicts = asyncio.run(
            run_checks(settings, openwebui_url=openwebui_url, timeout_s=timeout_s, admin=admin)
        )
    for verdict in verdicts:
        typer.echo(verdict.line())
    failed = [v for v in verdicts if v.level == FAIL]
    typer.echo(
        f"{len(failed)} of {len(verdicts)} checks failed"
        if failed
        else f"all {len(verdicts)} checks passed"
        + (
            f" ({sum(v.level == WARN for v in verdicts)} warnings)"
            if any(v.level == WARN for v in verdicts)
            else ""
        )
    )
    raise typer.Exit(code=1 if failed else 0)


def _check_action_path(url: str, admin: AdminLogin) -> Verdict:
    """The Remember button clicked through Open WebUI as the admin (on no chat, so nothing
    is stored): the action calls the service with its own valves.
    """
    from service.cli.openwebui_checks import check_action_through_openwebui, probe_model
    from service.cli.openwebui_client import OpenWebUI, OpenWebUIError

    try:
        owui = OpenWebUI.connect(url, token=admin.token, email=admin.email, password=admin.password)
    except OpenWebUIError as exc:
        return Verdict(FAIL, "remember button → service", str(exc))
    try:
        line = check_action_through_openwebui(owui, probe_model(owui))
        return Verdict(OK, "remember button → service", line)
    except OpenWebUIError as exc:
        return Verdict(FAIL, "remember button → service", str(exc))
    finally:
        owui.close()
