"""Checks made through Open WebUI as the admin: a `/memory` command typed to the filter, a
click of the Remember button, and whether Open WebUI's built-in memory is on.

The filter and the action run inside Open WebUI with their own valves, so these checks see
what every user's turn will see (unreachable service, wrong key, not the memory service).
"""

from __future__ import annotations

from typing import Any

from service.cli.openwebui_client import OpenWebUI, OpenWebUIError
from service.cli.openwebui_sources import ACTION_ID, FILTER_ID, PIPE_ID

__all__ = [
    "check_action_through_openwebui",
    "check_through_openwebui",
    "native_memory_line",
    "probe_model",
]

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
    first model it is attached to; None when it runs for none (or is not installed/active).
    """
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
