"""The filter file's shape: frontmatter, imports, valves, no per-request state."""

import ast
import re
import sys

import pytest

from testkit.filter_loader import FILTER_PATH, load_filter

SOURCE = FILTER_PATH.read_text(encoding="utf-8")
ALLOWED_THIRD_PARTY = {"pydantic", "httpx"}
# The key regex Open WebUI uses for frontmatter lines (utils/plugin.py, extract_frontmatter).
FRONTMATTER_LINE = re.compile(r"^\s*([a-z_]+):\s*(.*)\s*$", re.IGNORECASE)


def _frontmatter(source: str) -> dict[str, str]:
    lines = source.splitlines()
    assert lines[0] == '"""'
    found: dict[str, str] = {}
    for line in lines[1:]:
        if '"""' in line:
            return found
        match = FRONTMATTER_LINE.match(line)
        if match:
            found[match.group(1).lower()] = match.group(2).strip()
    raise AssertionError("frontmatter is not closed")


def test_file_starts_with_a_bare_docstring_quote_line():
    assert SOURCE.splitlines()[0] == '"""'


def test_frontmatter_carries_the_manifest_fields():
    manifest = _frontmatter(SOURCE)

    assert list(manifest) == [
        "title",
        "author",
        "version",
        "required_open_webui_version",
        "description",
        "license",
    ]
    assert manifest["title"] == "Memory Banks"
    assert manifest["version"] == "0.1.0"
    assert manifest["required_open_webui_version"] == "0.12.0"
    assert manifest["license"] == "MIT"
    assert manifest["author"] != ""
    assert manifest["description"] != ""


def test_imports_are_only_stdlib_pydantic_and_httpx():
    tree = ast.parse(SOURCE)
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports cannot work in an exec'd module"
            assert node.module is not None
            imported.add(node.module.split(".")[0])

    outside = {name for name in imported if name not in sys.stdlib_module_names}

    assert outside == ALLOWED_THIRD_PARTY


def test_module_top_level_only_defines_things():
    tree = ast.parse(SOURCE)
    body = tree.body
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    allowed = (
        ast.Import,
        ast.ImportFrom,
        ast.ClassDef,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.Assign,
        ast.AnnAssign,
    )
    assert [type(node).__name__ for node in body[1:] if not isinstance(node, allowed)] == []


@pytest.mark.parametrize("prefix", ["from utils", "from apps", "from main", "from config"])
def test_source_has_no_text_that_open_webui_rewrites(prefix):
    # Open WebUI rewrites these substrings anywhere in the file (utils/plugin.py, replace_imports).
    assert prefix not in SOURCE


def test_valves_defaults():
    module = load_filter()

    assert module.Filter.Valves().model_dump() == {
        "priority": 0,
        "service_url": "http://127.0.0.1:8765",
        "api_key": "",
        "inlet_timeout_s": 0.8,
        "outlet_timeout_s": 2.0,
        "budget_tokens": 400,
        "disable_native_memory": True,
        "read_in_temporary_chats": True,
        "no_memory_models": "",
        "assistant_memory_models": "",
        "commands_model_id": "memory_commands",
        "command_timeout_s": 5.0,
    }
    assert module.Filter.UserValves().model_dump() == {"enabled": True, "show_status": True}


@pytest.mark.parametrize("valves_class", ["Valves", "UserValves"])
def test_every_valve_has_a_description(valves_class):
    fields = getattr(load_filter().Filter, valves_class).model_fields

    assert [name for name, info in fields.items() if not info.description] == []


def test_filter_instance_holds_only_its_valves():
    module = load_filter()

    instance = module.Filter()

    assert list(vars(instance)) == ["valves"]
    assert isinstance(instance.valves, module.Filter.Valves)


def test_every_reserved_argument_defaults_to_none():
    import inspect

    module = load_filter()
    for hook in ("inlet", "outlet"):
        parameters = inspect.signature(getattr(module.Filter, hook)).parameters
        reserved = {name: p.default for name, p in parameters.items() if name.startswith("__")}
        assert reserved and set(reserved.values()) == {None}, hook
        assert inspect.iscoroutinefunction(getattr(module.Filter, hook))


def test_loading_twice_gives_independent_modules():
    first, second = load_filter(), load_filter()

    assert first is not second
    assert first.Filter is not second.Filter
