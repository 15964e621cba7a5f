"""`python -m service openwebui …` — install the filter and its companions into Open WebUI.

Three functions are pushed: the Memory Banks filter, the Memory Commands pipe (answers
`/memory …` verbatim) and the Memory Events function (forgets a deleted chat's Chat Memory).

Everything goes through Open WebUI's admin REST API (0.12.x). Every step reads the current
state first and writes only what differs, so running `install` twice changes nothing the
second time (Open WebUI's activation switches flip, they cannot be set).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from service import resources
from service.config import Settings

__all__ = [
    "EVENTS_ID",
    "FILTER_ID",
    "PIPE_ID",
    "FunctionSource",
    "OpenWebUI",
    "OpenWebUIError",
    "app",
    "read_sources",
]

FILTER_ID = "memory_filter"
PIPE_ID = "memory_commands"
EVENTS_ID = "memory_events"
#: the "Remember this" button under each reply (filter/memory_action.py)
ACTION_ID = "memory_action"
#: functions that call the memory service and so carry its url and key as valves
SERVICE_CALLERS = (FILTER_ID, EVENTS_ID)
EVERYONE_READS = {"principal_type": "user", "principal_id": "*", "permission": "read"}
SOURCE_DIR = resources.folder("filter")
REQUEST_TIMEOUT_S = 30.0
#: typed by the installer as the admin, through Open WebUI: the filter inside Open WebUI runs
#: it against the service with its valves, exactly as for a user's turn
PROBE_COMMAND = "/memory help"
#: the filter's marker before the cause it shows an admin when the service cannot be used
CAUSE_MARKER = "For the admin: "
#: the pipe's answer to a turn the filter did not reroute (filter/memory_commands.py)
PIPE_REFUSAL = "This model only answers /memory commands typed in a chat."
#: how the filter's answers begin when the service could not be used (filter/memory_filter.py
#: COMMAND_UNAVAILABLE and COMMAND_MISCONFIGURED); an older filter gives no cause after them
FAILED_COMMAND_OPENINGS = (
    "The memory service is not reachable right now",
    "Memory is not set up correctly",
)
# One `key: value` line of the docstring that opens a function file (its frontmatter).
_FRONTMATTER_LINE = re.compile(r"^\s*([a-z_]+):\s*(.*?)\s*$", re.IGNORECASE)

app = typer.Typer(
    help="Install the memory filter and its companions into a running Open WebUI.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


class OpenWebUIError(Exception):
    """Open WebUI refused or failed a request; the message is one sentence for the user."""


# --- the REST client -------------------------------------------------------------------------


@dataclass
class OpenWebUI:
    """An admin session with one Open WebUI server.

    Attributes:
        base_url: e.g. `http://127.0.0.1:8080` (no trailing slash).
        client: httpx client that sends the bearer token (JWT or `sk-…` API key).
        version: Open WebUI's version string, as `GET /api/version` reports it.
    """

    base_url: str
    client: httpx.Client
    version: str = ""

    @classmethod
    def connect(
        cls, url: str, *, token: str | None, email: str | None, password: str | None
    ) -> OpenWebUI:
        """Check that `url` is Open WebUI, sign in if needed and check that we are an admin.

        Raises:
            OpenWebUIError: unreachable, not Open WebUI, credentials refused, or not an admin.
        """
        base_url = url.rstrip("/")
        client = httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT_S, trust_env=False)
        owui = cls(base_url, client)
        try:
            owui.version = owui._version()
            if not token:
                if not (email and password):
                    raise OpenWebUIError("give --token, or --email and --password of an admin")
                token = owui._sign_in(email, password)
            client.headers["Authorization"] = f"Bearer {token}"
            owui._check_admin()
        except BaseException:
            client.close()
            raise
        return owui

    def close(self) -> None:
        self.client.close()

    def call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        """Send one request and return the decoded JSON answer.

        Raises:
            OpenWebUIError: transport failure or any status outside 2xx.
        """
        try:
            response = self.client.request(method, path, json=json, params=params)
        except httpx.TimeoutException as exc:
            raise OpenWebUIError(
                f"Open WebUI at {self.base_url} did not answer {method} {path} "
                f"within {REQUEST_TIMEOUT_S:g} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise OpenWebUIError(f"cannot reach Open WebUI at {self.base_url}: {exc}") from exc
        if not response.is_success:
            raise OpenWebUIError(
                f"Open WebUI answered {response.status_code} to {method} {path}: "
                f"{_detail(response)}"
            )
        return response.json() if response.content else None

    def _version(self) -> str:
        try:
            response = self.client.get("/api/version")
        except httpx.HTTPError as exc:
            raise OpenWebUIError(f"cannot reach Open WebUI at {self.base_url}: {exc}") from exc
        try:
            version = response.json().get("version") if response.is_success else None
        except ValueError:
            version = None
        if not isinstance(version, str):
            raise OpenWebUIError(
                f"{self.base_url} does not look like Open WebUI "
                f"(GET /api/version answered {response.status_code})"
            )
        return version

    def _sign_in(self, email: str, password: str) -> str:
        response = self.client.post(
            "/api/v1/auths/signin", json={"email": email, "password": password}
        )
        if response.status_code == 400:
            raise OpenWebUIError(f"Open WebUI refused the sign-in of {email}: {_detail(response)}")
        if not response.is_success:
            raise OpenWebUIError(
                f"Open WebUI answered {response.status_code} to the sign-in of "
                f"{email}: {_detail(response)}"
            )
        return str(response.json()["token"])

    def _check_admin(self) -> None:
        # Any signed-in user may list functions; only an admin may list them with their owners.
        first = self.client.get("/api/v1/functions/")
        if first.status_code in (401, 403):
            raise OpenWebUIError(f"Open WebUI refused the token: {_detail(first)}")
        second = self.client.get("/api/v1/functions/list")
        if second.status_code in (401, 403):
            raise OpenWebUIError(
                "this account is not an admin of Open WebUI; functions can "
                "only be installed by an admin"
            )
        if not second.is_success:
            raise OpenWebUIError(
                f"Open WebUI answered {second.status_code} to GET "
                f"/api/v1/functions/list: {_detail(second)}"
            )

    # -- functions -----------------------------------------------------------------------------

    def function(self, function_id: str) -> dict[str, Any] | None:
        """The stored function (with `content`, `is_active`, `is_global`), None if absent."""
        # GET /id/{id} answers 401 for a missing id, like a bad token; the list tells them apart.
        listed = {f["id"] for f in self.call("GET", "/api/v1/functions/list") or []}
        if function_id not in listed:
            return None
        found: dict[str, Any] = self.call("GET", f"/api/v1/functions/id/{function_id}")
        return found

    def valves(self, function_id: str) -> dict[str, Any]:
        """The admin valves stored for a function ({} when none were ever saved)."""
        return self.call("GET", f"/api/v1/functions/id/{function_id}/valves") or {}

    def model_rows(self) -> dict[str, dict[str, Any]]:
        """Every model row (workspace models and overrides of provider models), by id."""
        return {m["id"]: m for m in self.call("GET", "/api/v1/models/all") or []}

    def provider_models(self) -> dict[str, dict[str, Any]]:
        """The models Open WebUI offers (rebuilding its cached list), by id."""
        answer = self.call("GET", "/api/models", params={"refresh": "true"}) or {}
        return {m["id"]: m for m in answer.get("data", [])}

    def admin_config(self) -> dict[str, Any]:
        """Admin Panel → Settings → General, as `GET /api/v1/auths/admin/config` answers."""
        found: dict[str, Any] = self.call("GET", "/api/v1/auths/admin/config") or {}
        return found

    def ask(self, model_id: str, text: str) -> str:
        """One chat turn without a chat (no history is saved); the reply's text."""
        answer = self.call(
            "POST",
            "/api/chat/completions",
            json={
                "model": model_id,
                "stream": False,
                "messages": [{"role": "user", "content": text}],
            },
        )
        try:
            return str(answer["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError) as exc:
            raise OpenWebUIError(
                f"Open WebUI's answer to a chat turn has no reply text: {str(answer)[:200]}"
            ) from exc


# --- install, uninstall, status ---------------------------------------------------------------


@dataclass(frozen=True)
class FunctionSource:
    """One function file to push: id, display name, description and Python source."""

    function_id: str
    name: str
    description: str
    content: str

    @classmethod
    def read(cls, function_id: str, path: Path) -> FunctionSource:
        try:
            content = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise OpenWebUIError(f"cannot read {path}: {exc.strerror}") from exc
        manifest = _frontmatter(content)
        return cls(
            function_id,
            manifest.get("title") or function_id,
            manifest.get("description", ""),
            content,
        )


def read_sources(
    filter_file: Path = SOURCE_DIR / "memory_filter.py",
    pipe_file: Path = SOURCE_DIR / "memory_commands.py",
    events_file: Path = SOURCE_DIR / "memory_events.py",
    action_file: Path = SOURCE_DIR / "memory_action.py",
) -> dict[str, FunctionSource]:
    """The function files, by the function id they are installed under.

    Raises:
        OpenWebUIError: a file cannot be read.
    """
    return {
        FILTER_ID: FunctionSource.read(FILTER_ID, filter_file),
        PIPE_ID: FunctionSource.read(PIPE_ID, pipe_file),
        EVENTS_ID: FunctionSource.read(EVENTS_ID, events_file),
        ACTION_ID: FunctionSource.read(ACTION_ID, action_file),
    }


def install(
    owui: OpenWebUI,
    *,
    sources: dict[str, FunctionSource],
    service_url: str,
    api_key: str,
    make_global: bool,
    model_ids: list[str],
    native_memory_off: bool = False,
    say: Callable[[str], None] = typer.echo,
) -> None:
    """Bring Open WebUI to the installed state; each step writes only what differs; then
    check through Open WebUI that its filter reaches the service with the key.

    Args:
        sources: the files to push, by function id (FILTER_ID, PIPE_ID, EVENTS_ID).
        make_global: the filter runs for every model (else only for `model_ids`).
        model_ids: models whose `meta.filterIds` must list the filter (others are kept).
        native_memory_off: switch Open WebUI's built-in memory off for everyone.
        say: prints one line per step.

    Raises:
        OpenWebUIError: a step failed, or the installed filter cannot use the service (the
            message names the cause: unreachable, wrong key, wrong service, versions).
    """
    available = owui.provider_models()
    missing = [m for m in model_ids if m not in available]
    if missing:
        raise OpenWebUIError(
            f"Open WebUI has no model {', '.join(missing)}; "
            f"it offers {', '.join(sorted(available)) or 'none'}"
        )
    for source in sources.values():
        say(f"{source.function_id}: {_push_function(owui, source)}")
        say(f"{source.function_id}: {_set_flag(owui, source.function_id, 'is_active', True)}")
    say(f"{FILTER_ID}: {_set_flag(owui, FILTER_ID, 'is_global', make_global)}")
    for function_id in SERVICE_CALLERS:
        say(
            f"{function_id}: "
            f"{_set_valves(owui, function_id, service_url=service_url, api_key=api_key)}"
        )
    if ACTION_ID in sources:
        install_action(owui, service_url=service_url, api_key=api_key, say=say)
    rows = owui.model_rows()
    for model_id in model_ids:
        say(f"model {model_id}: {_attach_filter(owui, model_id, rows.get(model_id), available)}")
    say(f"model {PIPE_ID}: {_ensure_pipe_row(owui, rows.get(PIPE_ID), sources[PIPE_ID].name)}")
    owui.provider_models()  # rebuild the cached model list so the pipe model is routable now
    if native_memory_off:
        say(f"open webui memory: {_switch_native_memory_off(owui)}")
    where = "every model" if make_global else ", ".join(model_ids) or "no model yet"
    say(
        f"installed into Open WebUI {owui.version} at {owui.base_url}: the filter runs for "
        f"{where} and calls {service_url}"
    )
    probe_model = PIPE_ID if make_global else (model_ids[0] if model_ids else None)
    say(check_through_openwebui(owui, probe_model, installed=True))
    if not native_memory_off:
        say(native_memory_line(owui))


def uninstall(owui: OpenWebUI, *, say: Callable[[str], None] = typer.echo) -> None:
    """Remove the functions, the pipe's model row and the filter from every model row."""
    for model_id, row in owui.model_rows().items():
        if model_id == PIPE_ID:
            owui.call("POST", "/api/v1/models/model/delete", json={"id": PIPE_ID})
            say(f"model {PIPE_ID}: deleted")
            continue
        meta = dict(row.get("meta") or {})
        kept = {
            key: [f for f in meta.get(key) or [] if f != FILTER_ID]
            for key in ("filterIds", "defaultFilterIds")
            if FILTER_ID in (meta.get(key) or [])
        }
        if kept:
            owui.call(
                "POST", "/api/v1/models/model/update", json=_model_form(row, {**meta, **kept})
            )
            say(f"model {model_id}: filter detached")
    for function_id in (FILTER_ID, PIPE_ID, EVENTS_ID, ACTION_ID):
        if owui.function(function_id) is None:
            say(f"{function_id}: not installed")
            continue
        owui.call("DELETE", f"/api/v1/functions/id/{function_id}/delete")
        say(f"{function_id}: deleted")
    owui.provider_models()
    say(f"uninstalled from Open WebUI {owui.version} at {owui.base_url}")


def status(
    owui: OpenWebUI, *, sources: dict[str, FunctionSource], say: Callable[[str], None] = typer.echo
) -> None:
    """Print what is installed, whether it is active, and whether its code is current."""
    say(f"Open WebUI {owui.version} at {owui.base_url}")
    rows = owui.model_rows()
    for function_id, source in sources.items():
        found = owui.function(function_id)
        if found is None:
            say(f"{function_id}: not installed")
            continue
        facts = ["active" if found.get("is_active") else "INACTIVE"]
        if function_id == FILTER_ID:
            attached = sorted(
                m
                for m, row in rows.items()
                if FILTER_ID in ((row.get("meta") or {}).get("filterIds") or [])
            )
            facts.append(
                "global"
                if found.get("is_global")
                else f"attached to {', '.join(attached) or 'no model'}"
            )
        facts.append(
            "code is current"
            if found.get("content") == source.content
            else "code differs from the local file"
        )
        say(f"{function_id}: installed, {', '.join(facts)}")
        if function_id == ACTION_ID:
            say(action_status_line(owui, found))
        if function_id in SERVICE_CALLERS:
            valves = owui.valves(function_id)
            key = "set" if valves.get("api_key") else "NOT SET"
            say(
                f"{function_id}: service_url = {valves.get('service_url', '(default)')}, "
                f"api_key {key}"
            )
    row = rows.get(PIPE_ID)
    if row is None:
        say(f"model {PIPE_ID}: no model row (ordinary users cannot run commands)")
        return
    say(
        f"model {PIPE_ID}: "
        + ", ".join(
            [
                "active" if row.get("is_active") else "INACTIVE",
                "hidden" if (row.get("meta") or {}).get("hidden") else "VISIBLE in the model list",
                "readable by everyone" if _everyone_reads(row) else "NOT readable by everyone",
            ]
        )
    )
    say(native_memory_line(owui))
    if owui.function(FILTER_ID) is not None:
        say(check_through_openwebui(owui, probe_model(owui, rows)))
    if ACTION_ID in sources and owui.function(ACTION_ID) is not None:
        say(check_action_through_openwebui(owui, probe_model(owui, rows)))


def install_action(
    owui: OpenWebUI, *, service_url: str, api_key: str, say: Callable[[str], None]
) -> None:
    """Make the pushed and active "Remember this" action global (its button shows under
    every model's replies) and give it the service's url and key, like the filter."""
    say(f"{ACTION_ID}: {_set_flag(owui, ACTION_ID, 'is_global', True)}")
    say(f"{ACTION_ID}: {_set_valves(owui, ACTION_ID, service_url=service_url, api_key=api_key)}")


def action_status_line(owui: OpenWebUI, found: dict[str, Any]) -> str:
    """Whether the action's button shows (global) and reaches the service (its valves)."""
    valves = owui.valves(ACTION_ID)
    shown = "global (shown under every reply)" if found.get("is_global") else "NOT GLOBAL"
    key = "set" if valves.get("api_key") else "NOT SET"
    return (
        f"{ACTION_ID}: {shown}, service_url = {valves.get('service_url', '(default)')}, "
        f"api_key {key}"
    )


#: what the action answers a probe without a chat (service/core/remember.py NO_CHAT): it
#: reached the service with its key
ACTION_PROBE_ANSWER = "Not remembered: memories are kept from chats only"


def check_action_through_openwebui(owui: OpenWebUI, model_id: str | None) -> str:
    """Click the Remember button as the admin through Open WebUI on a message of no chat:
    the action calls the service with its valves and, reaching it, is told it keeps
    memories from chats only (nothing is stored).

    Returns:
        the line to print when the action reached the service with its key.

    Raises:
        OpenWebUIError: the action is missing, inactive, or cannot use the service (the
            message carries the action's own cause).
    """
    found = owui.function(ACTION_ID)
    if found is None or not found.get("is_active"):
        raise OpenWebUIError(
            f"the Remember button ({ACTION_ID}) is not installed or not active "
            "(python -m service openwebui install)"
        )
    model = model_id or next(iter(sorted(owui.provider_models())), None)
    if model is None:
        return "check: Remember button skipped, Open WebUI offers no model"
    probe = {"id": "memory-doctor-probe", "role": "user", "content": "probe"}
    answer = owui.call(
        "POST",
        f"/api/chat/actions/{ACTION_ID}",
        json={
            "model": model,
            "messages": [probe],
            "chat_id": "",
            "session_id": None,
            "id": probe["id"],
        },
    )
    line = str((answer or {}).get("status_line", "")) if isinstance(answer, dict) else ""
    if line != ACTION_PROBE_ANSWER:
        cause = line.split("for the admin: ", 1)[-1] if line else "it gave no status line"
        raise OpenWebUIError(f"the Remember button cannot use the memory service: {cause}")
    return f"check: the Remember button ({ACTION_ID}) reached the memory service with its key"


def probe_model(owui: OpenWebUI, rows: dict[str, dict[str, Any]] | None = None) -> str | None:
    """A model the installed filter runs for: the pipe's when the filter is global, else the
    first model it is attached to; None when it runs for none (or is not installed/active)."""
    found = owui.function(FILTER_ID)
    if found is None or not found.get("is_active"):
        return None
    if found.get("is_global"):
        return PIPE_ID
    attached = sorted(
        m
        for m, row in (rows if rows is not None else owui.model_rows()).items()
        if FILTER_ID in ((row.get("meta") or {}).get("filterIds") or []) and m != PIPE_ID
    )
    return attached[0] if attached else None


def check_through_openwebui(
    owui: OpenWebUI, model_id: str | None, *, installed: bool = False
) -> str:
    """Type PROBE_COMMAND as the admin through Open WebUI, so the filter — running inside
    Open WebUI, with its valves — calls the service as it will for every user.

    Returns:
        the line to print when the filter reached the service with the key.

    Raises:
        OpenWebUIError: the filter did not run, or it could not use the service; the
            message carries the filter's own cause (unreachable, wrong key, not the
            memory service, incompatible versions).
    """
    if model_id is None:
        return "check: skipped, the filter is not active for any model yet"
    answer = owui.ask(model_id, PROBE_COMMAND)
    done = "installed, but " if installed else ""
    if CAUSE_MARKER in answer:
        cause = answer.split(CAUSE_MARKER, 1)[1].strip()
        raise OpenWebUIError(f"{done}Open WebUI's filter cannot use the memory service: {cause}")
    if answer.startswith(FAILED_COMMAND_OPENINGS):
        raise OpenWebUIError(
            f"{done}Open WebUI's filter cannot use the memory service (this filter gives no "
            "cause: install the current one)"
        )
    if answer.strip() == PIPE_REFUSAL:
        raise OpenWebUIError(
            f"{done}the filter did not run for model {model_id}: check that it is active "
            "and global (or attached to that model)"
        )
    return (
        f"check: a /memory command typed in Open WebUI (model {model_id}) reached the "
        "memory service with the filter's key"
    )


def native_memory_line(owui: OpenWebUI) -> str:
    """Whether Open WebUI's built-in memory is on for everyone, and how to switch it off."""
    try:
        enabled = owui.admin_config().get("ENABLE_MEMORIES")
    except OpenWebUIError:
        return "open webui memory: unknown (Admin Panel → Settings → General → Memories)"
    if enabled is False:
        return "open webui memory: off for everyone; Memory Banks is the only memory"
    return (
        "open webui memory: still on — its Settings → Personalization → Memory accepts "
        "memories that the filter keeps out of chats it handles; switch it off with "
        "`install --native-memory-off` (or Admin Panel → Settings → General → Memories)"
    )


def _switch_native_memory_off(owui: OpenWebUI) -> str:
    config = owui.admin_config()
    if config.get("ENABLE_MEMORIES") is False:
        return "already off for everyone"
    # the form is the whole config: what was read is sent back with the one switch changed
    owui.call("POST", "/api/v1/auths/admin/config", json={**config, "ENABLE_MEMORIES": False})
    return "switched off for everyone (Memory Banks is the only memory)"


def _push_function(owui: OpenWebUI, source: FunctionSource) -> str:
    found = owui.function(source.function_id)
    form = {
        "id": source.function_id,
        "name": source.name,
        "content": source.content,
        "meta": {"description": source.description},
    }
    if found is None:
        owui.call("POST", "/api/v1/functions/create", json=form)
        return "created"
    if found.get("content") == source.content and found.get("name") == source.name:
        return "code unchanged"
    owui.call("POST", f"/api/v1/functions/id/{source.function_id}/update", json=form)
    return "code updated"


def _set_flag(owui: OpenWebUI, function_id: str, flag: str, wanted: bool) -> str:
    """Flip `is_active` or `is_global` only when it differs from `wanted`."""
    found = owui.function(function_id)
    if found is None:
        raise OpenWebUIError(f"function {function_id} disappeared while installing")
    words = {"is_active": ("active", "inactive"), "is_global": ("global", "not global")}[flag]
    word = words[0] if wanted else words[1]
    if bool(found.get(flag)) == wanted:
        return f"already {word}"
    path = "toggle" if flag == "is_active" else "toggle/global"
    flipped = owui.call("POST", f"/api/v1/functions/id/{function_id}/{path}")
    if bool((flipped or {}).get(flag)) != wanted:
        raise OpenWebUIError(f"Open WebUI did not make {function_id} {word}")
    return f"made {word}"


def _set_valves(owui: OpenWebUI, function_id: str, *, service_url: str, api_key: str) -> str:
    stored = owui.valves(function_id)
    # Open WebUI stores exactly the valves sent, so the others are sent back unchanged.
    wanted = {**stored, "service_url": service_url, "api_key": api_key}
    if wanted == stored:
        return "valves unchanged"
    owui.call("POST", f"/api/v1/functions/id/{function_id}/valves/update", json=wanted)
    return "valves set (service_url, api_key)"


def _attach_filter(
    owui: OpenWebUI, model_id: str, row: dict[str, Any] | None, available: dict[str, dict[str, Any]]
) -> str:
    if row is None:  # a provider model without a row: an override row carries the filter
        owui.call(
            "POST",
            "/api/v1/models/create",
            json={
                "id": model_id,
                "base_model_id": None,
                "name": available[model_id].get("name") or model_id,
                "meta": {"filterIds": [FILTER_ID]},
                "params": {},
            },
        )
        return "filter attached (new model row)"
    meta = dict(row.get("meta") or {})
    filter_ids = list(meta.get("filterIds") or [])
    if FILTER_ID in filter_ids:
        return "filter already attached"
    meta["filterIds"] = [*filter_ids, FILTER_ID]
    owui.call("POST", "/api/v1/models/model/update", json=_model_form(row, meta))
    return "filter attached"


def _ensure_pipe_row(owui: OpenWebUI, row: dict[str, Any] | None, name: str) -> str:
    """A hidden, active model row for the pipe that every user may read (COMMANDS §2.1)."""
    if row is None:
        owui.call(
            "POST",
            "/api/v1/models/create",
            json={
                "id": PIPE_ID,
                "base_model_id": None,
                "name": name,
                "meta": {"hidden": True},
                "params": {},
                "is_active": True,
                "access_grants": [EVERYONE_READS],
            },
        )
        return "created (hidden, readable by everyone)"
    done: list[str] = []
    meta = dict(row.get("meta") or {})
    if not meta.get("hidden") or not row.get("is_active"):
        form = {**_model_form(row, {**meta, "hidden": True}), "is_active": True}
        owui.call("POST", "/api/v1/models/model/update", json=form)
        done.append("hidden and active")
    if not _everyone_reads(row):
        grants = [_grant_form(g) for g in row.get("access_grants") or []]
        owui.call(
            "POST",
            "/api/v1/models/model/access/update",
            json={"id": PIPE_ID, "access_grants": [*grants, EVERYONE_READS]},
        )
        done.append("readable by everyone")
    return "made " + " and ".join(done) if done else "already hidden and readable by everyone"


def _model_form(row: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The update form for a model row with a new `meta` (is_active is left as it is)."""
    return {
        "id": row["id"],
        "base_model_id": row.get("base_model_id"),
        "name": row["name"],
        "meta": meta,
        "params": row.get("params") or {},
    }


def _grant_form(grant: dict[str, Any]) -> dict[str, str]:
    return {k: grant[k] for k in ("principal_type", "principal_id", "permission")}


def _everyone_reads(row: dict[str, Any]) -> bool:
    return any(_grant_form(g) == EVERYONE_READS for g in row.get("access_grants") or [])


def _frontmatter(source: str) -> dict[str, str]:
    """`key: value` lines of the opening docstring (lowercased keys)."""
    lines = source.splitlines()
    found: dict[str, str] = {}
    if not lines or lines[0].strip() != '"""':
        return found
    for line in lines[1:]:
        if '"""' in line:
            break
        match = _FRONTMATTER_LINE.match(line)
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, str) and detail:
        return detail
    return response.reason_phrase or "no detail"


# --- commands ---------------------------------------------------------------------------------

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
    filter_file: FilterFile = SOURCE_DIR / "memory_filter.py",
    pipe_file: PipeFile = SOURCE_DIR / "memory_commands.py",
    events_file: EventsFile = SOURCE_DIR / "memory_events.py",
    action_file: ActionFile = SOURCE_DIR / "memory_action.py",
    verbose: Verbose = False,
) -> None:
    """Install or update the filter, the command pipe and the events function, switch them
    on, set the valves, then check through Open WebUI that the filter reaches the service."""
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
            sources=read_sources(filter_file, pipe_file, events_file, action_file),
            service_url=(service_url or local_service_url()).rstrip("/"),
            api_key=key,
            make_global=make_global if make_global is not None else not model_ids,
            model_ids=model_ids,
            native_memory_off=native_memory_off,
        )


@app.command("uninstall")
def uninstall_command(
    url: Url = DEFAULT_URL,
    token: Token = None,
    email: Email = None,
    password: Password = None,
    verbose: Verbose = False,
) -> None:
    """Delete the functions and the pipe's model row; detach the filter from models."""
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
    verbose: Verbose = False,
) -> None:
    """Show what is installed and active, whether the installed code is current, and check
    through Open WebUI that the filter reaches the service with its key."""
    with _session(url, token, email, password, verbose) as owui:
        status(owui, sources=read_sources(filter_file, pipe_file, events_file, action_file))


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
    wildcard host becomes 127.0.0.1 (Open WebUI on another machine needs --service-url)."""
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
