"""The installer's steps for the Memory Tools (service/cli/openwebui_tools.py) against an
in-memory stand-in of Open WebUI 0.12.4's REST routes for tools and model rows (the real
server is tests/e2e/test_e2e_installer.py)."""

from __future__ import annotations

import copy
from typing import Any

from service.cli import openwebui_sources, openwebui_tools
from service.cli.openwebui_sources import TOOLS_ID

EVERYONE_READS = {"principal_type": "user", "principal_id": "*", "permission": "read"}


class Rest:
    """Tools, their valves and model rows as Open WebUI keeps them; every write is logged."""

    def __init__(self) -> None:
        self.tools: dict[str, dict[str, Any]] = {}
        self.tool_valves_by_id: dict[str, dict[str, Any]] = {}
        self.rows: dict[str, dict[str, Any]] = {
            "stub-model": {"id": "stub-model", "name": "Stub", "meta": {"toolIds": ["web"]}}
        }
        self.writes: list[tuple[str, str]] = []

    def tool(self, tool_id: str) -> dict[str, Any] | None:
        found = self.tools.get(tool_id)
        return copy.deepcopy(found) if found else None

    def tool_valves(self, tool_id: str) -> dict[str, Any]:
        return dict(self.tool_valves_by_id.get(tool_id, {}))

    def model_rows(self) -> dict[str, dict[str, Any]]:
        return copy.deepcopy(self.rows)

    def call(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Any:
        self.writes.append((method, path))
        if path == "/api/v1/tools/create":
            self.tools[json["id"]] = {**json, "access_grants": json.get("access_grants") or []}
        elif path == f"/api/v1/tools/id/{TOOLS_ID}/update":
            self.tools[TOOLS_ID].update({k: v for k, v in json.items() if k != "access_grants"})
        elif path == f"/api/v1/tools/id/{TOOLS_ID}/access/update":
            self.tools[TOOLS_ID]["access_grants"] = json["access_grants"]
        elif path == f"/api/v1/tools/id/{TOOLS_ID}/valves/update":
            self.tool_valves_by_id[TOOLS_ID] = dict(json)
        elif path == f"/api/v1/tools/id/{TOOLS_ID}/delete":
            del self.tools[TOOLS_ID]
        elif path in ("/api/v1/models/create", "/api/v1/models/model/update"):
            self.rows[json["id"]] = {**self.rows.get(json["id"], {}), **json}
        else:
            raise AssertionError(f"unexpected {method} {path}")
        return None


SOURCE = openwebui_sources.read_sources()[TOOLS_ID]
AVAILABLE = {"stub-model": {"name": "Stub"}, "other": {"name": "Other"}}


def _install(rest: Rest, models: list[str]) -> list[str]:
    said: list[str] = []
    openwebui_tools.install_tools(
        rest,  # type: ignore[arg-type]
        source=SOURCE,
        service_url="http://svc:8765",
        api_key="key",
        model_ids=models,
        available=AVAILABLE,
        say=said.append,
    )
    return said


def test_install_pushes_the_tool_readable_by_everyone_and_offers_it_to_the_named_models() -> None:
    rest = Rest()

    first = _install(rest, ["stub-model", "other"])
    state = copy.deepcopy((rest.tools, rest.tool_valves_by_id, rest.rows))
    writes = len(rest.writes)
    again = _install(rest, ["stub-model", "other"])

    assert first == [
        "memory_tools: created",
        "memory_tools: already readable by everyone",
        "memory_tools: valves set (service_url, api_key)",
        "model stub-model: memory tools offered",
        "model other: memory tools offered (new model row)",
    ]
    assert rest.tools[TOOLS_ID]["access_grants"] == [EVERYONE_READS]
    assert rest.tools[TOOLS_ID]["content"] == SOURCE.content
    assert rest.tool_valves_by_id[TOOLS_ID] == {"service_url": "http://svc:8765", "api_key": "key"}
    assert rest.rows["stub-model"]["meta"]["toolIds"] == ["web", TOOLS_ID]
    assert rest.rows["other"]["meta"] == {"toolIds": [TOOLS_ID]}
    assert again == [
        "memory_tools: code unchanged",
        "memory_tools: already readable by everyone",
        "memory_tools: valves unchanged",
        "model stub-model: memory tools already offered",
        "model other: memory tools already offered",
    ]
    assert len(rest.writes) == writes
    assert (rest.tools, rest.tool_valves_by_id, rest.rows) == state


def test_install_restores_the_grant_and_updates_changed_code() -> None:
    rest = Rest()
    _install(rest, [])
    rest.tools[TOOLS_ID]["access_grants"] = []
    rest.tools[TOOLS_ID]["content"] = "# an older file"

    said = _install(rest, [])

    assert said[:2] == ["memory_tools: code updated", "memory_tools: made readable by everyone"]
    assert rest.tools[TOOLS_ID]["content"] == SOURCE.content
    assert rest.tools[TOOLS_ID]["access_grants"] == [EVERYONE_READS]


def test_uninstall_takes_the_tool_off_every_model_then_deletes_it() -> None:
    rest = Rest()
    _install(rest, ["stub-model"])
    said: list[str] = []

    openwebui_tools.uninstall_tools(rest, say=said.append)  # type: ignore[arg-type]
    again: list[str] = []
    openwebui_tools.uninstall_tools(rest, say=again.append)  # type: ignore[arg-type]

    assert said == ["model stub-model: memory tools taken off", "memory_tools: deleted"]
    assert rest.rows["stub-model"]["meta"]["toolIds"] == ["web"]
    assert rest.tools == {}
    assert again == ["memory_tools: not installed"]


def test_status_names_the_models_that_offer_the_tool() -> None:
    rest = Rest()
    _install(rest, ["stub-model"])
    said: list[str] = []

    openwebui_tools.tools_status(rest, source=SOURCE, say=said.append)  # type: ignore[arg-type]

    assert said == [
        "memory_tools: installed, code is current, readable by everyone, offered to stub-model",
        "memory_tools: service_url = http://svc:8765, api_key set",
    ]
