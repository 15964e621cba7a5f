"""The Memory Commands pipe is a self-contained Open WebUI function file."""

from __future__ import annotations

import ast
import sys

from testkit.filter_loader import FILTER_PATH, load_filter

PIPE_PATH = FILTER_PATH.parent / "memory_commands.py"


def test_pipe_file_loads_like_open_webui_and_imports_only_what_it_ships() -> None:
    source = PIPE_PATH.read_text(encoding="utf-8")
    assert source.splitlines()[0] == '"""'
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    assert roots - set(sys.stdlib_module_names) <= {"pydantic", "httpx"}
    pipe = load_filter(PIPE_PATH).Pipe()
    assert vars(pipe).keys() == {"valves"}


async def test_pipe_returns_the_stashed_text_verbatim() -> None:
    pipe = load_filter(PIPE_PATH).Pipe()
    text = "**Memories** (1):\n\n- `k7m2qa` Personal · 2026-11-30 · I keep bees"
    assert await pipe.pipe({}, __metadata__={"memory_command": {"text": text}}) == text
    assert await pipe.pipe({}, __metadata__=None) == (
        "This model only answers /memory commands typed in a chat."
    )
