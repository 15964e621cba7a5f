"""The installer's steps for the Memory Tools (filter/memory_tools.py), an Open WebUI Tool.

Open WebUI 0.12.4 keeps Tools apart from functions (`/api/v1/tools/…`) and has no global
Tool: a Tool is offered to a model by its id in the model's `meta.toolIds` (the chat input
then starts with it switched on; Workspace → Models → a model → Tools shows the same list),
or picked by the user per chat (the chat input's integrations menu lists every Tool the user
may read). So the installer pushes the file, lets every user read it, gives it the service's
url and key, and adds it to the `meta.toolIds` of the models named with `--tools-model`.

Every step reads first and writes only what differs, like the functions' steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.cli.openwebui_client import (
    OpenWebUI,
    OpenWebUIError,
    add_to_model_meta,
    model_form,
    set_service_valves,
)
from service.cli.openwebui_sources import TOOLS_ID, FunctionSource

__all__ = ["install_tools", "offered_to", "tools_status", "uninstall_tools"]

#: the grant that lets every user read (and so use) the Tool
EVERYONE_READS = {"principal_type": "user", "principal_id": "*", "permission": "read"}


def install_tools(
    owui: OpenWebUI,
    *,
    source: FunctionSource,
    service_url: str,
    api_key: str,
    model_ids: list[str],
    available: dict[str, dict[str, Any]],
    say: Callable[[str], None],
) -> None:
    """Push the Tool, let every user read it, set its valves, offer it to `model_ids`.

    Raises:
        OpenWebUIError: a step failed.
    """
    say(f"{TOOLS_ID}: {_push(owui, source)}")
    say(f"{TOOLS_ID}: {_everyone_reads(owui)}")
    say(f"{TOOLS_ID}: {_set_valves(owui, service_url=service_url, api_key=api_key)}")
    rows = owui.model_rows()
    for model_id in model_ids:
        say(f"model {model_id}: {_offer(owui, model_id, rows.get(model_id), available)}")


def uninstall_tools(owui: OpenWebUI, *, say: Callable[[str], None]) -> None:
    """Take the Tool off every model row, then delete it."""
    for model_id, row in owui.model_rows().items():
        meta = dict(row.get("meta") or {})
        if TOOLS_ID not in (meta.get("toolIds") or []):
            continue
        meta["toolIds"] = [t for t in meta["toolIds"] if t != TOOLS_ID]
        owui.call("POST", "/api/v1/models/model/update", json=model_form(row, meta))
        say(f"model {model_id}: memory tools taken off")
    if owui.tool(TOOLS_ID) is None:
        say(f"{TOOLS_ID}: not installed")
        return
    owui.call("DELETE", f"/api/v1/tools/id/{TOOLS_ID}/delete")
    say(f"{TOOLS_ID}: deleted")


def tools_status(owui: OpenWebUI, *, source: FunctionSource, say: Callable[[str], None]) -> None:
    """What is installed: the code, who may use it, which models offer it, its valves."""
    found = owui.tool(TOOLS_ID)
    if found is None:
        say(f"{TOOLS_ID}: not installed")
        return
    models = offered_to(owui.model_rows())
    facts = [
        "code is current"
        if found.get("content") == source.content
        else "code differs from the local file",
        "readable by everyone" if _everyone(found) else "NOT readable by everyone",
        f"offered to {', '.join(models)}" if models else "offered to no model (--tools-model)",
    ]
    say(f"{TOOLS_ID}: installed, {', '.join(facts)}")
    valves = owui.tool_valves(TOOLS_ID)
    key = "set" if valves.get("api_key") else "NOT SET"
    say(f"{TOOLS_ID}: service_url = {valves.get('service_url', '(default)')}, api_key {key}")


def offered_to(rows: dict[str, dict[str, Any]]) -> list[str]:
    """Ids of the model rows whose `meta.toolIds` list the Tool, sorted."""
    return sorted(
        m for m, row in rows.items() if TOOLS_ID in ((row.get("meta") or {}).get("toolIds") or [])
    )


def _push(owui: OpenWebUI, source: FunctionSource) -> str:
    found = owui.tool(TOOLS_ID)
    form: dict[str, Any] = {
        "id": TOOLS_ID,
        "name": source.name,
        "content": source.content,
        "meta": {"description": source.description},
    }
    if found is None:
        owui.call("POST", "/api/v1/tools/create", json={**form, "access_grants": [EVERYONE_READS]})
        return "created"
    if found.get("content") == source.content and found.get("name") == source.name:
        return "code unchanged"
    owui.call("POST", f"/api/v1/tools/id/{TOOLS_ID}/update", json=form)
    return "code updated"


def _everyone(found: dict[str, Any]) -> bool:
    return any(
        {k: g.get(k) for k in EVERYONE_READS} == EVERYONE_READS
        for g in found.get("access_grants") or []
    )


def _everyone_reads(owui: OpenWebUI) -> str:
    found = owui.tool(TOOLS_ID)
    if found is None:
        raise OpenWebUIError(f"tool {TOOLS_ID} disappeared while installing")
    if _everyone(found):
        return "already readable by everyone"
    grants = [
        {k: g[k] for k in ("principal_type", "principal_id", "permission")}
        for g in found.get("access_grants") or []
    ]
    owui.call(
        "POST",
        f"/api/v1/tools/id/{TOOLS_ID}/access/update",
        json={"access_grants": [*grants, EVERYONE_READS]},
    )
    return "made readable by everyone"


def _set_valves(owui: OpenWebUI, *, service_url: str, api_key: str) -> str:
    return set_service_valves(
        owui,
        stored=owui.tool_valves(TOOLS_ID),
        update_path=f"/api/v1/tools/id/{TOOLS_ID}/valves/update",
        service_url=service_url,
        api_key=api_key,
    )


def _offer(
    owui: OpenWebUI, model_id: str, row: dict[str, Any] | None, available: dict[str, dict[str, Any]]
) -> str:
    """Add the Tool to the model's `meta.toolIds` (a new override row for a provider model)."""
    done = add_to_model_meta(owui, model_id, row, available, key="toolIds", item=TOOLS_ID)
    return {
        "created": "memory tools offered (new model row)",
        "present": "memory tools already offered",
        "added": "memory tools offered",
    }[done]
