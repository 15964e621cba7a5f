"""The Remember action file's shape (Open WebUI pastes it) and its pure readers."""

from __future__ import annotations

import ast
import sys
from typing import Any

import pytest

from service.cli import openwebui_sources
from testkit.filter_loader import load_filter

PATH = openwebui_sources.SOURCE_DIR / "memory_action.py"
SOURCE = PATH.read_text(encoding="utf-8")
module = load_filter(PATH)


def test_the_file_opens_with_frontmatter_and_imports_only_what_open_webui_ships() -> None:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(SOURCE)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    lines = SOURCE.splitlines()

    assert lines[0] == '"""'
    assert lines[1] == "title: Remember this"
    assert lines[7].startswith("icon_url: data:image/svg+xml;base64,")
    assert roots - set(sys.stdlib_module_names) == {"pydantic", "httpx"}


def test_the_action_keeps_no_state_but_its_valves_and_masks_the_key() -> None:
    action = module.Action()
    schema = action.Valves.model_json_schema()["properties"]

    assert vars(action).keys() == {"valves"}
    assert list(schema) == ["service_url", "api_key", "timeout_s"]
    assert schema["api_key"]["input"] == {"type": "password"}
    assert action.valves.timeout_s == 30.0


@pytest.mark.parametrize(
    ("messages", "clicked", "index"),
    [
        ([{"id": "a"}, {"id": "b"}, {"id": "c"}], "b", 1),
        ([{"id": "a"}, {"id": "b"}], "zz", 1),  # unknown id: the last message
        ([], "a", None),
    ],
)
def test_the_clicked_message_is_found_by_its_id(
    messages: list[dict[str, Any]], clicked: str, index: int | None
) -> None:
    assert module._clicked(messages, clicked) == index


HISTORY = {
    "history": {
        "messages": {
            "u-own": {"id": "u-own", "role": "user", "user_id": "owner"},
            "u-other": {"id": "u-other", "role": "user", "user_id": "guest"},
            "r-other": {"id": "r-other", "role": "assistant", "parentId": "u-other"},
            "r-tagged": {"id": "r-tagged", "role": "assistant", "user_id": "guest"},
            "u-old": {"id": "u-old", "role": "user"},
        }
    }
}


@pytest.mark.parametrize(
    ("message_id", "author"),
    [
        ("u-own", "owner"),
        ("u-other", "guest"),
        ("r-other", "guest"),  # a reply is the turn of the user it answers
        ("r-tagged", "guest"),
        ("u-old", "owner"),  # no user id kept: only the owner wrote in such a chat
        ("missing", None),
    ],
)
def test_the_author_is_the_user_open_webui_keeps_on_the_message(
    message_id: str, author: str | None
) -> None:
    assert module._author(HISTORY, message_id, "owner") == author


def test_reasoning_blocks_are_left_out_of_a_reply() -> None:
    reply = '<details type="reasoning">thinking…</details>\nYou keep bees.'
    assert module._text(reply, "assistant") == "You keep bees."
    assert module._text([{"type": "text", "text": "I keep bees"}], "user") == "I keep bees"
