"""Install, uninstall and status of the memory functions in Open WebUI.

Three functions are pushed: the Memory Banks filter, the Memory Commands pipe (answers
`/memory …` verbatim) and the Memory Events function (forgets a deleted chat's Chat Memory),
plus the "Remember this" action, the pipe's hidden model row and the Memory Tools of
tool-calling models (an Open WebUI Tool, service/cli/openwebui_tools.py).

Every step reads the current state first and writes only what differs, so running `install`
twice changes nothing the second time (Open WebUI's activation switches flip, they cannot be
set).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from service.cli.openwebui_checks import (
    check_action_through_openwebui,
    check_through_openwebui,
    native_memory_line,
    probe_model,
)
from service.cli.openwebui_client import (
    OpenWebUI,
    OpenWebUIError,
    add_to_model_meta,
    model_form,
    set_service_valves,
)
from service.cli.openwebui_sources import (
    ACTION_ID,
    EVENTS_ID,
    FILTER_ID,
    PIPE_ID,
    SERVICE_CALLERS,
    TOOLS_ID,
    FunctionSource,
)
from service.cli.openwebui_tools import install_tools, tools_status, uninstall_tools

__all__ = ["install", "install_action", "status", "uninstall"]

#: the grant that lets every user read (and so run) the pipe's hidden model row (COMMANDS §2.1)
EVERYONE_READS = {"principal_type": "user", "principal_id": "*", "permission": "read"}


def install(
    owui: OpenWebUI,
    *,
    sources: dict[str, FunctionSource],
    service_url: str,
    api_key: str,
    make_global: bool,
    model_ids: list[str],
    native_memory_off: bool = False,
    tools_model_ids: list[str] | None = None,
    say: Callable[[str], None] = typer.echo,
) -> None:
    """Bring Open WebUI to the installed state; each step writes only what differs; then
    check through Open WebUI that its filter reaches the service with the key.

    Args:
        sources: the files to push, by function id (FILTER_ID, PIPE_ID, EVENTS_ID).
        make_global: the filter runs for every model (else only for `model_ids`).
        model_ids: models whose `meta.filterIds` must list the filter (others are kept).
        native_memory_off: switch Open WebUI's built-in memory off for everyone.
        tools_model_ids: models that offer the Memory Tools in every new chat (their
            `meta.toolIds`; others are kept); the Tool itself is pushed when `sources` has it.
        say: prints one line per step.

    Raises:
        OpenWebUIError: a step failed, or the installed filter cannot use the service (the
            message names the cause: unreachable, wrong key, wrong service, versions).
    """
    available = owui.provider_models()
    tools_model_ids = list(dict.fromkeys(tools_model_ids or []))
    missing = [m for m in dict.fromkeys([*model_ids, *tools_model_ids]) if m not in available]
    if missing:
        raise OpenWebUIError(
            f"Open WebUI has no model {', '.join(missing)}; "
            f"it offers {', '.join(sorted(available)) or 'none'}"
        )
    functions = [s for s in sources.values() if s.function_id != TOOLS_ID]
    for source in functions:
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
    if TOOLS_ID in sources:
        install_tools(
            owui,
            source=sources[TOOLS_ID],
            service_url=service_url,
            api_key=api_key,
            model_ids=tools_model_ids,
            available=available,
            say=say,
        )
    elif tools_model_ids:
        raise OpenWebUIError("--tools-model needs the Memory Tools file")
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
    """Remove the functions, the pipe's model row, the filter from every model row and the
    Memory Tools (from every model row too).
    """
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
            owui.call("POST", "/api/v1/models/model/update", json=model_form(row, {**meta, **kept}))
            say(f"model {model_id}: filter detached")
    for function_id in (FILTER_ID, PIPE_ID, EVENTS_ID, ACTION_ID):
        if owui.function(function_id) is None:
            say(f"{function_id}: not installed")
            continue
        owui.call("DELETE", f"/api/v1/functions/id/{function_id}/delete")
        say(f"{function_id}: deleted")
    uninstall_tools(owui, say=say)
    owui.provider_models()
    say(f"uninstalled from Open WebUI {owui.version} at {owui.base_url}")


def status(
    owui: OpenWebUI, *, sources: dict[str, FunctionSource], say: Callable[[str], None] = typer.echo
) -> None:
    """Print what is installed, whether it is active, and whether its code is current."""
    say(f"Open WebUI {owui.version} at {owui.base_url}")
    rows = owui.model_rows()
    for function_id, source in sources.items():
        if function_id == TOOLS_ID:
            tools_status(owui, source=source, say=say)
            continue
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
                "readable by everyone" if everyone_reads(row) else "NOT readable by everyone",
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
    every model's replies) and give it the service's url and key, like the filter.
    """
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
    return set_service_valves(
        owui,
        stored=owui.valves(function_id),
        update_path=f"/api/v1/functions/id/{function_id}/valves/update",
        service_url=service_url,
        api_key=api_key,
    )


def _attach_filter(
    owui: OpenWebUI, model_id: str, row: dict[str, Any] | None, available: dict[str, dict[str, Any]]
) -> str:
    done = add_to_model_meta(owui, model_id, row, available, key="filterIds", item=FILTER_ID)
    return {
        "created": "filter attached (new model row)",
        "present": "filter already attached",
        "added": "filter attached",
    }[done]


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
        form = {**model_form(row, {**meta, "hidden": True}), "is_active": True}
        owui.call("POST", "/api/v1/models/model/update", json=form)
        done.append("hidden and active")
    if not everyone_reads(row):
        grants = [_grant_form(g) for g in row.get("access_grants") or []]
        owui.call(
            "POST",
            "/api/v1/models/model/access/update",
            json={"id": PIPE_ID, "access_grants": [*grants, EVERYONE_READS]},
        )
        done.append("readable by everyone")
    return "made " + " and ".join(done) if done else "already hidden and readable by everyone"


def _grant_form(grant: dict[str, Any]) -> dict[str, str]:
    return {k: grant[k] for k in ("principal_type", "principal_id", "permission")}


def everyone_reads(row: dict[str, Any]) -> bool:
    return any(_grant_form(g) == EVERYONE_READS for g in row.get("access_grants") or [])
