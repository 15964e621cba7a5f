"""`openwebui assistant-memory`: the tag the filter reads is added to (or removed from) the
workspace model's row, other tags and fields kept, and Open WebUI's model list rebuilt."""

from __future__ import annotations

from typing import Any

import pytest

from service.cli import openwebui_assistants
from service.cli.openwebui_client import OpenWebUIError
from testkit.filter_loader import load_filter


class _Rows:
    """An Open WebUI session holding model rows; records the calls it gets."""

    def __init__(self, rows: dict[str, dict[str, Any]]) -> None:
        self.rows = rows
        self.calls: list[tuple[str, str, Any]] = []
        self.refreshed = 0

    def model_rows(self) -> dict[str, dict[str, Any]]:
        return self.rows

    def call(self, method: str, path: str, *, json: Any = None) -> Any:
        self.calls.append((method, path, json))
        return {}

    def provider_models(self) -> dict[str, Any]:
        self.refreshed += 1
        return {}


def _row(*tags: str) -> dict[str, Any]:
    return {
        "id": "coder",
        "name": "Coding Helper",
        "base_model_id": "stub-model",
        "meta": {"description": "writes code", "tags": [{"name": t} for t in tags]},
        "params": {"system": "You write code."},
    }


def test_marking_adds_the_tag_and_keeps_the_rest_of_the_row() -> None:
    owui = _Rows({"coder": _row("work")})
    line = openwebui_assistants.set_own_memory(owui, "coder", on=True)  # type: ignore[arg-type]
    assert line.startswith("Coding Helper (coder) now keeps its own memory")
    assert owui.calls == [
        (
            "POST",
            "/api/v1/models/model/update",
            {
                "id": "coder",
                "base_model_id": "stub-model",
                "name": "Coding Helper",
                "meta": {
                    "description": "writes code",
                    "tags": [{"name": "work"}, {"name": "own-memory"}],
                },
                "params": {"system": "You write code."},
            },
        )
    ]
    assert owui.refreshed == 1


def test_unmarking_removes_only_the_tag() -> None:
    owui = _Rows({"coder": _row("work", "Own-Memory")})
    line = openwebui_assistants.set_own_memory(owui, "coder", on=False)  # type: ignore[arg-type]
    assert line.startswith("Coding Helper (coder) no longer keeps its own memory")
    assert owui.calls[0][2]["meta"]["tags"] == [{"name": "work"}]


@pytest.mark.parametrize(("tags", "on"), [(("own-memory",), True), ((), False)])
def test_nothing_changes_when_the_model_is_already_so(tags: tuple[str, ...], on: bool) -> None:
    owui = _Rows({"coder": _row(*tags)})
    line = openwebui_assistants.set_own_memory(owui, "coder", on=on)  # type: ignore[arg-type]
    assert line.endswith("its own memory") and owui.calls == [] and owui.refreshed == 0


def test_an_unknown_model_is_an_error_naming_the_rows() -> None:
    owui = _Rows({"coder": _row()})
    with pytest.raises(OpenWebUIError) as raised:
        openwebui_assistants.set_own_memory(owui, "writer", on=True)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "Open WebUI has no workspace model 'writer' (create the assistant in Workspace → "
        "Models first; model rows: coder)"
    )


def test_the_cli_writes_the_tag_the_filter_reads() -> None:
    assert openwebui_assistants.OWN_MEMORY_TAG == load_filter().OWN_MEMORY_TAG
