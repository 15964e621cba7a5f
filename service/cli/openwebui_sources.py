"""The function files the installer pushes into Open WebUI, and the ids they get there.

Each file opens with a docstring of `key: value` lines (its frontmatter: title, description,
…), read here for the name and description Open WebUI shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from service import resources
from service.cli.openwebui_client import OpenWebUIError

__all__ = [
    "ACTION_ID",
    "EVENTS_ID",
    "FILTER_ID",
    "PIPE_ID",
    "SERVICE_CALLERS",
    "SOURCE_DIR",
    "TOOLS_ID",
    "FunctionSource",
    "read_sources",
]

FILTER_ID = "memory_filter"
PIPE_ID = "memory_commands"
EVENTS_ID = "memory_events"
#: the "Remember this" button under each reply (filter/memory_action.py)
ACTION_ID = "memory_action"
#: the Memory Tools of tool-calling models (filter/memory_tools.py): an Open WebUI *Tool*,
#: stored apart from the functions (`/api/v1/tools/…`) and offered per model
TOOLS_ID = "memory_tools"
#: functions that call the memory service and so carry its url and key as valves
SERVICE_CALLERS = (FILTER_ID, EVENTS_ID)
SOURCE_DIR = resources.folder("filter")
# One `key: value` line of the docstring that opens a function file (its frontmatter).
_FRONTMATTER_LINE = re.compile(r"^\s*([a-z_]+):\s*(.*?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class FunctionSource:
    """One function file to push: id, display name, description and Python source."""

    function_id: str
    name: str
    description: str
    content: str

    @classmethod
    def read(cls, function_id: str, path: Path) -> FunctionSource:
        """The function file at `path`, named and described by its frontmatter.

        Raises:
            OpenWebUIError: the file cannot be read.
        """
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
    tools_file: Path = SOURCE_DIR / "memory_tools.py",
) -> dict[str, FunctionSource]:
    """The function files and the Tool file, by the id they are installed under.

    Raises:
        OpenWebUIError: a file cannot be read.
    """
    return {
        FILTER_ID: FunctionSource.read(FILTER_ID, filter_file),
        PIPE_ID: FunctionSource.read(PIPE_ID, pipe_file),
        EVENTS_ID: FunctionSource.read(EVENTS_ID, events_file),
        ACTION_ID: FunctionSource.read(ACTION_ID, action_file),
        TOOLS_ID: FunctionSource.read(TOOLS_ID, tools_file),
    }


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
