"""The function files the installer pushes, read the way Open WebUI reads them."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import pytest

from service.cli import openwebui_sources
from service.cli.openwebui_client import OpenWebUIError
from testkit.filter_loader import load_filter

# Open WebUI 0.12.4 instantiates the first of these classes a function file defines and
# stores the function under that type (utils/plugin.py, load_function_module_by_id); a Tool
# file defines `Tools` (load_tool_module_by_id) and is stored apart from the functions.
OPEN_WEBUI_TYPES = (
    ("Pipe", "pipe"),
    ("Filter", "filter"),
    ("Action", "action"),
    ("Event", "event"),
    ("Tools", "tool"),
)


def _open_webui_type(module: types.ModuleType) -> str:
    return next(kind for name, kind in OPEN_WEBUI_TYPES if hasattr(module, name))


def test_installer_reads_four_functions_and_the_tool_named_by_their_frontmatter():
    sources = openwebui_sources.read_sources()

    assert {fid: (s.name, s.function_id) for fid, s in sources.items()} == {
        "memory_filter": ("Memory Banks", "memory_filter"),
        "memory_commands": ("Memory Commands", "memory_commands"),
        "memory_events": ("Memory Events", "memory_events"),
        "memory_action": ("Remember this", "memory_action"),
        "memory_tools": ("Memory Tools", "memory_tools"),
    }
    assert sources["memory_events"].description.startswith(
        "Companion of the Memory Banks filter. When a chat, a folder or a user account is deleted"
    )


def test_installer_sources_load_as_the_function_types_open_webui_expects():
    types_by_id = {
        fid: _open_webui_type(load_filter(openwebui_sources.SOURCE_DIR / f"{fid}.py"))
        for fid in openwebui_sources.read_sources()
    }

    assert types_by_id == {
        "memory_filter": "filter",
        "memory_commands": "pipe",
        "memory_events": "event",
        "memory_action": "action",
        "memory_tools": "tool",
    }


def test_installer_events_file_imports_only_what_open_webui_ships():
    source = (openwebui_sources.SOURCE_DIR / "memory_events.py").read_text(encoding="utf-8")
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])

    assert source.splitlines()[0] == '"""'
    assert roots - set(sys.stdlib_module_names) <= {"pydantic", "httpx"}
    events = load_filter(openwebui_sources.SOURCE_DIR / "memory_events.py")
    assert vars(events.Event()).keys() == {"valves"}


def test_installer_names_a_missing_file_in_one_sentence(tmp_path: Path):
    missing = tmp_path / "memory_events.py"

    with pytest.raises(OpenWebUIError) as raised:
        openwebui_sources.read_sources(events_file=missing)

    assert str(raised.value) == f"cannot read {missing}: No such file or directory"
