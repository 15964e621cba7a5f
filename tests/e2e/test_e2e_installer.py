"""`python -m service openwebui install|status|uninstall` against a real Open WebUI."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.llm_stub import MODEL_ID
from testkit.openwebui import system_text
from testkit.openwebui_stack import Stack

pytestmark = pytest.mark.e2e

FILTER_ID, PIPE_ID, EVENTS_ID = "memory_filter", "memory_commands", "memory_events"
ACTION_ID = "memory_action"
TOOLS_ID = "memory_tools"
EVERYONE_READS = {"principal_type": "user", "principal_id": "*", "permission": "read"}


def _state(stack: Stack) -> dict[str, Any]:
    """Everything the installer may write, as Open WebUI stores it (timestamps included)."""
    admin = stack.client("admin")
    listed = {f["id"] for f in admin.call("GET", "/api/v1/functions/list")}
    functions = {
        fid: admin.call("GET", f"/api/v1/functions/id/{fid}")
        for fid in (FILTER_ID, PIPE_ID, EVENTS_ID, ACTION_ID)
        if fid in listed
    }
    valves = {
        fid: admin.call("GET", f"/api/v1/functions/id/{fid}/valves")
        for fid in (FILTER_ID, EVENTS_ID, ACTION_ID)
        if fid in listed
    }
    rows = {m["id"]: m for m in admin.call("GET", "/api/v1/models/all")}
    tools = {
        t["id"]: admin.call("GET", f"/api/v1/tools/id/{t['id']}")
        for t in admin.call("GET", "/api/v1/tools/list")
    }
    tool_valves = {tid: admin.call("GET", f"/api/v1/tools/id/{tid}/valves") for tid in tools}
    return {
        "functions": functions,
        "valves": valves,
        "rows": rows,
        "tools": tools,
        "tool_valves": tool_valves,
    }


def _grants(row: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {k: g[k] for k in ("principal_type", "principal_id", "permission")}
        for g in row.get("access_grants") or []
    ]


def test_installer_leaves_filter_global_pipe_hidden_but_readable_and_events_active(
    stack: Stack,
):
    state = _state(stack)

    assert stack.installer_output.splitlines()[:8] == [
        "memory_filter: created",
        "memory_filter: made active",
        "memory_commands: created",
        "memory_commands: made active",
        "memory_events: created",
        "memory_events: made active",
        "memory_action: created",
        "memory_action: made active",
    ]
    assert "memory_action: made global" in stack.installer_output.splitlines()
    flt, pipe = state["functions"][FILTER_ID], state["functions"][PIPE_ID]
    events = state["functions"][EVENTS_ID]
    assert (flt["type"], flt["is_active"], flt["is_global"]) == ("filter", True, True)
    assert (pipe["type"], pipe["is_active"]) == ("pipe", True)
    assert (events["type"], events["is_active"]) == ("event", True)
    action = state["functions"][ACTION_ID]
    assert (action["type"], action["is_active"], action["is_global"]) == ("action", True, True)
    for function_id in (FILTER_ID, EVENTS_ID, ACTION_ID):
        assert state["valves"][function_id]["service_url"] == stack.service_url
        assert state["valves"][function_id]["api_key"] == stack.service_key
    row = state["rows"][PIPE_ID]
    assert (row["name"], row["is_active"], row["meta"]["hidden"]) == ("Memory Commands", True, True)
    assert _grants(row) == [EVERYONE_READS]
    tool = state["tools"][TOOLS_ID]
    assert tool["name"] == "Memory Tools"
    assert sorted(spec["name"] for spec in tool["specs"]) == [
        "memory_add",
        "memory_forget",
        "memory_search",
    ]
    assert _grants(tool) == [EVERYONE_READS]
    assert state["tool_valves"][TOOLS_ID]["service_url"] == stack.service_url
    assert state["tool_valves"][TOOLS_ID]["api_key"] == stack.service_key
    for line in (
        "memory_tools: created",
        "memory_tools: already readable by everyone",
        "memory_tools: valves set (service_url, api_key)",
    ):
        assert line in stack.installer_output.splitlines()


def test_an_ordinary_user_may_use_the_memory_tools(stack: Stack):
    listed = stack.client("a").call("GET", "/api/v1/tools/")

    assert [t["id"] for t in listed if t["id"] == TOOLS_ID] == [TOOLS_ID]


def test_installer_run_again_changes_nothing(stack: Stack):
    before = _state(stack)

    again = stack.run_installer()

    assert again.returncode == 0, again.stderr
    assert _state(stack) == before
    *steps, installed, check, native = again.stdout.splitlines()
    assert steps and all(("unchanged" in s or "already" in s) for s in steps), again.stdout
    assert installed.startswith("installed into Open WebUI 0.12.4 at ")
    assert check == (
        "check: a /memory command typed in Open WebUI (model memory_commands) reached the "
        "memory service with the filter's key"
    )
    assert native.startswith("open webui memory: still on")


def test_status_reports_what_is_installed(stack: Stack):
    shown = stack.run_installer(command="status")

    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1:] == [
        "memory_filter: installed, active, global, code is current",
        f"memory_filter: service_url = {stack.service_url}, api_key set",
        "memory_commands: installed, active, code is current",
        "memory_events: installed, active, code is current",
        f"memory_events: service_url = {stack.service_url}, api_key set",
        "memory_action: installed, active, code is current",
        f"memory_action: global (shown under every reply), service_url = {stack.service_url}, "
        "api_key set",
        "memory_tools: installed, code is current, readable by everyone, offered to no model "
        "(--tools-model)",
        f"memory_tools: service_url = {stack.service_url}, api_key set",
        "model memory_commands: active, hidden, readable by everyone",
        "open webui memory: still on — its Settings → Personalization → Memory accepts "
        "memories that the filter keeps out of chats it handles; switch it off with "
        "`install --native-memory-off` (or Admin Panel → Settings → General → Memories)",
        "check: a /memory command typed in Open WebUI (model memory_commands) reached the "
        "memory service with the filter's key",
        "check: the Remember button (memory_action) reached the memory service with its key",
    ]


@pytest.mark.parametrize("who", ["a", "garbage"])
def test_installer_refuses_ordinary_users_and_bad_tokens_in_one_line(stack: Stack, who: str):
    token = stack.users["a"].token if who == "a" else "not-a-token"

    refused = stack.run_installer(token=token)

    assert refused.returncode == 1
    assert refused.stdout == ""
    assert (
        refused.stderr
        == {
            "a": "error: this account is not an admin of Open WebUI; functions can only be "
            "installed by an admin\n",
            "garbage": "error: Open WebUI refused the token: 401 Unauthorized\n",
        }[who]
    )


def test_installer_attaches_to_a_model_and_keeps_its_other_filters(stack: Stack):
    admin = stack.client("admin")
    row = _state(stack)["rows"][MODEL_ID]
    admin.call(
        "POST",
        "/api/v1/models/model/update",
        json={
            "id": MODEL_ID,
            "name": row["name"],
            "base_model_id": None,
            "params": row["params"],
            "meta": {**row["meta"], "filterIds": ["another_filter"]},
        },
    )
    stack.forget_memories(stack.users["a"].id)
    stack.add_memory(stack.users["a"].id, "User keeps bees")
    try:
        attached = stack.run_installer("--no-global", "--model", MODEL_ID)
        again = stack.run_installer("--no-global", "--model", MODEL_ID)
        state = _state(stack)
        mark = stack.model_log.mark()
        stack.client("a").send(stack.client("a").new_thread(), "Hello")
        seen = list(stack.model_log.iter_chat(mark))
    finally:
        restored = stack.run_installer()
        admin.call(
            "POST",
            "/api/v1/models/model/update",
            json={
                "id": MODEL_ID,
                "name": row["name"],
                "base_model_id": None,
                "params": row["params"],
                "meta": row["meta"],
            },
        )

    assert attached.returncode == 0, attached.stderr
    assert "model stub-model: filter attached" in attached.stdout.splitlines()
    assert "model stub-model: filter already attached" in again.stdout.splitlines()
    assert state["rows"][MODEL_ID]["meta"]["filterIds"] == ["another_filter", FILTER_ID]
    assert _grants(state["rows"][MODEL_ID]) == [EVERYONE_READS]
    assert state["functions"][FILTER_ID]["is_global"] is False
    assert len(seen) == 1 and "User keeps bees" in system_text(seen[0])
    assert restored.returncode == 0, restored.stderr
    assert _state(stack)["functions"][FILTER_ID]["is_global"] is True


def test_uninstall_removes_everything_and_install_brings_it_back(stack: Stack):
    try:
        removed = stack.run_installer(command="uninstall")
        gone = _state(stack)
        status = stack.run_installer(command="status")
    finally:
        reinstalled = stack.run_installer()
        stack.be_patient_with_the_service()

    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines()[:-1] == [
        "model memory_commands: deleted",
        "memory_filter: deleted",
        "memory_commands: deleted",
        "memory_events: deleted",
        "memory_action: deleted",
        "memory_tools: deleted",
    ]
    assert gone["functions"] == {}
    assert gone["tools"] == {}
    assert PIPE_ID not in gone["rows"]
    assert status.stdout.splitlines()[1:] == [
        "memory_filter: not installed",
        "memory_commands: not installed",
        "memory_events: not installed",
        "memory_action: not installed",
        "memory_tools: not installed",
        "model memory_commands: no model row (ordinary users cannot run commands)",
    ]
    assert reinstalled.returncode == 0, reinstalled.stderr
    state = _state(stack)
    assert state["functions"][FILTER_ID]["is_global"] is True
    assert state["functions"][EVENTS_ID]["is_active"] is True
    assert state["valves"][EVENTS_ID]["api_key"] == stack.service_key
    assert state["functions"][ACTION_ID]["is_global"] is True
    assert state["rows"][PIPE_ID]["meta"]["hidden"] is True
    assert state["tool_valves"][TOOLS_ID]["api_key"] == stack.service_key
