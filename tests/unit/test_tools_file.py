"""The Memory Tools file (filter/memory_tools.py): its shape as Open WebUI reads a Tool, the
chat it describes to the service (the filter's rules), its status lines and its answers.

The service is a real HTTP stand-in (tests/support/memory_stub.py); Open WebUI's tables are
tests/support/open_webui_fake.py plus the memory filter's valves."""

from __future__ import annotations

import ast
import inspect
import re
import sys
import types
from typing import Any

import pytest

from service.cli import openwebui_sources
from testkit.filter_loader import load_filter
from tests.support.emitter import EventRecorder, status
from tests.support.memory_stub import (
    MemoryServiceStub,
    RecordedRequest,
    StubReply,
    closed_port_url,
)
from tests.support.open_webui_fake import FakeOpenWebUI

PATH = openwebui_sources.SOURCE_DIR / "memory_tools.py"
SOURCE = PATH.read_text(encoding="utf-8")
USER = {"id": "u1", "name": "Ada", "role": "user", "timezone": "Europe/Paris"}
ADMIN = {**USER, "role": "admin"}
#: `__metadata__` of a browser turn in a saved chat, as Open WebUI 0.12.4 hands it to tools
METADATA: dict[str, Any] = {
    "chat_id": "c1",
    "session_id": "sid-1",
    "model_id": "stub-model",
    "model": {"id": "stub-model", "name": "Stub", "info": {"meta": {}}},
    "variables": {"{{CURRENT_TIMEZONE}}": "Europe/Berlin"},
}
MEMORY = {"id": "k7m2qa", "bank": "personal", "content": "User keeps bees", "created": "2026-01-02"}
#: the Tool's methods: what the model calls (every other public callable would be a tool too)
METHODS = ["memory_add", "memory_forget", "memory_search"]
RESERVED = {"self", "__user__", "__metadata__", "__chat_id__", "__event_emitter__"}


def _answer(request: RecordedRequest) -> StubReply:
    """As the service answers each tool (service/api/routes/tools.py)."""
    if request.path == "/v1/tools/search":
        return StubReply(
            json={
                "status": "found",
                "text": "1 memory found (id · bank · date · text):\n- k7m2qa · Personal · "
                "2026-01-02 · User keeps bees",
                "memories": [MEMORY],
            }
        )
    if request.path == "/v1/tools/add":
        return StubReply(
            json={
                "status": "added",
                "text": "Remembered in Personal as k7m2qa: User keeps bees",
                "memories": [MEMORY],
            }
        )
    if request.path == "/v1/tools/forget":
        return StubReply(
            json={
                "status": "forgotten",
                "text": "Forgot k7m2qa: User keeps bees",
                "memories": [MEMORY],
            }
        )
    return StubReply(status=404, json={"detail": "Not Found"})


@pytest.fixture
def service() -> Any:
    with MemoryServiceStub(_answer) as stub:
        yield stub


def _tools(url: str, key: str = "k") -> Any:
    tools = load_filter(PATH).Tools()
    tools.valves = tools.Valves(service_url=url, api_key=key)
    return tools


def _install(
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeOpenWebUI,
    *,
    valves: dict[str, Any] | None = None,
    user_valves: dict[str, Any] | None = None,
) -> None:
    """Open WebUI's tables, and the memory filter's admin and user valves."""
    fake.install(monkeypatch)

    async def function_valves(function_id: str) -> dict[str, Any] | None:
        return valves if function_id == "memory_filter" else None

    async def user_function_valves(function_id: str, user_id: str) -> dict[str, Any] | None:
        return user_valves if function_id == "memory_filter" else None

    module = types.ModuleType("open_webui.models.functions")
    module.Functions = types.SimpleNamespace(  # type: ignore[attr-defined]
        get_function_valves_by_id=function_valves,
        get_user_valves_by_id_and_user_id=user_function_valves,
    )
    monkeypatch.setitem(sys.modules, "open_webui.models.functions", module)


async def _call(
    tools: Any,
    method: str,
    *,
    user: Any = USER,
    metadata: dict[str, Any] | None = None,
    chat_id: str | None = "c1",
    **arguments: Any,
) -> tuple[str, list[dict[str, Any]]]:
    events = EventRecorder()
    answer = await getattr(tools, method)(
        **arguments,
        __user__=user,
        __metadata__=METADATA if metadata is None else metadata,
        __chat_id__=chat_id,
        __event_emitter__=events,
    )
    return answer, events.events


# --- the file as Open WebUI reads it ----------------------------------------------------------


def test_the_file_opens_with_frontmatter_and_imports_only_what_open_webui_ships() -> None:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(SOURCE)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])

    assert SOURCE.splitlines()[:2] == ['"""', "title: Memory Tools"]
    assert roots - set(sys.stdlib_module_names) == {"pydantic", "httpx"}
    assert "from __future__" not in SOURCE  # Open WebUI reads the annotations at load time


def test_the_tool_offers_exactly_three_functions_each_described_for_the_model() -> None:
    tools = load_filter(PATH).Tools()
    # Open WebUI 0.12.4 offers every public callable of the instance (get_functions_from_tool)
    public = sorted(
        name
        for name in dir(tools)
        if not name.startswith("_")
        and callable(getattr(tools, name))
        and not inspect.isclass(getattr(tools, name))
    )

    assert public == METHODS
    for name in METHODS:
        method = getattr(tools, name)
        assert inspect.iscoroutinefunction(method)
        doc = inspect.getdoc(method) or ""
        description = re.split(":(param|return)", doc, maxsplit=1)[0].strip()
        parameters = [p for p in inspect.signature(method).parameters if p not in RESERVED]
        documented = re.findall(r":param (\w+):", doc)
        assert len(description) > 60, name
        assert documented == parameters, name
        assert ":return:" in doc, name


def test_the_tool_keeps_no_state_but_its_valves_and_masks_the_key() -> None:
    tools = load_filter(PATH).Tools()
    schema = tools.Valves.model_json_schema()["properties"]

    assert vars(tools).keys() == {"valves"}
    assert list(schema) == ["service_url", "api_key", "timeout_s"]
    assert schema["api_key"]["input"] == {"type": "password"}


# --- what the service is told -----------------------------------------------------------------


async def test_each_tool_posts_the_chat_as_the_filter_describes_it(service: Any) -> None:
    tools = _tools(service.url)

    await _call(tools, "memory_search", query="bees")
    await _call(tools, "memory_add", content="User keeps bees", bank="Interaction Patterns")
    await _call(tools, "memory_forget", memory_id=" k7m2qa ")

    chat = {
        "user_id": "u1",
        "user_name": "Ada",
        "chat_id": "c1",
        "kind": "saved",
        "folder_id": None,
        "collaborative": False,
        "collaborative_reason": None,
        "read_in_temporary": True,
        "timezone": "Europe/Berlin",
    }
    assert [(r.path, r.body) for r in service.requests] == [
        ("/v1/tools/search", {"chat": chat, "query": "bees"}),
        (
            "/v1/tools/add",
            {"chat": chat, "content": "User keeps bees", "bank": "interaction_patterns"},
        ),
        ("/v1/tools/forget", {"chat": chat, "memory_id": "k7m2qa"}),
    ]
    assert {r.headers["authorization"] for r in service.requests} == {"Bearer k"}


@pytest.mark.parametrize(
    ("chat_id", "metadata", "kind"),
    [
        ("local:abc", {}, "temporary"),
        ("", {}, "api"),
        ("channel:x", {}, "channel"),
        ("c1", {"task": "title_generation"}, "task"),
        ("c1", {"automation_id": "a1"}, "automated"),
        ("c1", {"internal": True}, "automated"),
    ],
)
async def test_the_chat_kind_is_the_filters(
    service: Any, chat_id: str, metadata: dict[str, Any], kind: str
) -> None:
    await _call(_tools(service.url), "memory_search", chat_id=chat_id, metadata=metadata, query="x")

    assert service.requests[0].body["chat"]["kind"] == kind
    assert service.requests[0].body["chat"]["collaborative"] is (kind == "channel")


@pytest.mark.parametrize(
    ("fake", "reason"),
    [
        (FakeOpenWebUI(chats={"c1": {"user_id": "u2", "folder_id": None}}), "sender_not_owner"),
        (
            FakeOpenWebUI(
                chats={"c1": {"user_id": "u1", "folder_id": None}}, shares={"c1": "continue"}
            ),
            "chat_shared",
        ),
        (
            FakeOpenWebUI(
                chats={"c1": {"user_id": "u1", "folder_id": "f1"}},
                folders={"f1": {"user_id": "u1", "parent_id": None}},
                grants={
                    "f1": [{"principal_type": "user", "principal_id": "u2", "permission": "read"}]
                },
            ),
            "folder_shared",
        ),
        (FakeOpenWebUI(), "lookup_failed"),
        (FakeOpenWebUI(chats={"c1": {"user_id": "u1", "folder_id": None}}), None),
    ],
)
async def test_a_shared_chat_is_told_as_shared(
    service: Any, monkeypatch: pytest.MonkeyPatch, fake: FakeOpenWebUI, reason: str | None
) -> None:
    _install(monkeypatch, fake)

    await _call(_tools(service.url), "memory_search", query="bees")

    chat = service.requests[0].body["chat"]
    assert (chat["collaborative"], chat["collaborative_reason"]) == (reason is not None, reason)


async def test_a_folder_the_sender_cannot_open_is_not_sent(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeOpenWebUI(
        chats={"c1": {"user_id": "u1", "folder_id": "f1"}},
        folders={"f1": {"user_id": "u1", "parent_id": None}},
    )
    _install(monkeypatch, fake)

    await _call(_tools(service.url), "memory_search", query="bees")
    await _call(
        _tools(service.url),
        "memory_search",
        user={**USER, "id": "u3"},
        query="bees",
    )

    first, second = (r.body["chat"] for r in service.requests)
    assert (first["folder_id"], first["collaborative"]) == ("f1", False)
    assert (second["folder_id"], second["collaborative_reason"]) == (None, "sender_not_owner")


@pytest.mark.parametrize(
    ("model", "valves", "assistant"),
    [
        (
            {"id": "coach", "name": "Coach", "info": {"meta": {"tags": [{"name": "own-memory"}]}}},
            {},
            ("coach", "Coach"),
        ),
        (
            {"id": "coach", "name": "Coach", "info": {"meta": {}}},
            {"assistant_memory_models": "co*"},
            ("coach", "Coach"),
        ),
        ({"id": "coach", "name": "Coach", "info": {"meta": {}}}, {}, None),
    ],
)
async def test_an_assistant_with_its_own_memory_is_named_from_the_chats_model(
    service: Any,
    monkeypatch: pytest.MonkeyPatch,
    model: dict[str, Any],
    valves: dict[str, Any],
    assistant: tuple[str, str] | None,
) -> None:
    _install(
        monkeypatch,
        FakeOpenWebUI(chats={"c1": {"user_id": "u1", "folder_id": None}}),
        valves=valves,
    )

    await _call(
        _tools(service.url),
        "memory_add",
        metadata={**METADATA, "model_id": "coach", "model": model},
        content="User runs 5 km",
    )

    chat = service.requests[0].body["chat"]
    assert (chat.get("assistant_id"), chat.get("assistant_name")) == (assistant or (None, None))


async def test_temporary_chats_read_only_when_the_filter_lets_them(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(monkeypatch, FakeOpenWebUI(), valves={"read_in_temporary_chats": False})

    await _call(_tools(service.url), "memory_search", chat_id="local:x", query="bees")

    assert service.requests[0].body["chat"]["read_in_temporary"] is False


@pytest.mark.parametrize(
    ("valves", "user_valves", "text", "line"),
    [
        (
            {},
            {"enabled": False},
            "The user switched memory off; answer without it.",
            "Memory is switched off in your settings",
        ),
        (
            {"no_memory_models": "stub-*"},
            None,
            "Memory is not available to this model; answer without it.",
            "Memory is not used with this model",
        ),
    ],
)
async def test_a_user_who_switched_memory_off_and_a_model_without_memory_get_nothing(
    service: Any,
    monkeypatch: pytest.MonkeyPatch,
    valves: dict[str, Any],
    user_valves: dict[str, Any] | None,
    text: str,
    line: str,
) -> None:
    _install(monkeypatch, FakeOpenWebUI(), valves=valves, user_valves=user_valves)

    answer, events = await _call(_tools(service.url), "memory_search", query="bees")

    assert service.requests == []
    assert answer == text
    assert events == [status(line)]


# --- what the model and the user are told -----------------------------------------------------


async def test_the_model_reads_the_services_answer_and_the_user_a_status_line(service: Any) -> None:
    tools = _tools(service.url)

    searched = await _call(tools, "memory_search", query="bees")
    added = await _call(tools, "memory_add", content="User keeps bees")
    forgot = await _call(tools, "memory_forget", memory_id="k7m2qa")

    assert searched == (
        _answer(RecordedRequest("POST", "/v1/tools/search", {}, b"", None)).json["text"],
        [status("Searched memories: 1 found")],
    )
    assert added == (
        "Remembered in Personal as k7m2qa: User keeps bees",
        [status("Remembered: User keeps bees")],
    )
    assert forgot == ("Forgot k7m2qa: User keeps bees", [status("Forgot: User keeps bees")])


async def test_a_refusal_is_the_status_line_too() -> None:
    def refuse(request: RecordedRequest) -> StubReply:
        if request.path == "/v1/tools/search":
            return StubReply(
                json={"status": "none", "text": "No memory matches “x”.", "memories": []}
            )
        return StubReply(
            json={
                "status": "not_allowed",
                "text": "Not remembered: nothing is stored from a temporary chat.",
                "memories": [],
            }
        )

    with MemoryServiceStub(refuse) as stub:
        tools = _tools(stub.url)
        searched = await _call(tools, "memory_search", query="x")
        added = await _call(tools, "memory_add", content="User keeps bees")

    assert searched == ("No memory matches “x”.", [status("Searched memories: none found")])
    assert added == (
        "Not remembered: nothing is stored from a temporary chat.",
        [status("Not remembered: nothing is stored from a temporary chat.")],
    )


async def test_an_unreachable_service_tells_the_model_to_go_on_and_the_admin_why() -> None:
    url = closed_port_url()
    tools = _tools(url)

    as_user = await _call(tools, "memory_search", query="bees")
    as_admin = await _call(tools, "memory_add", user=ADMIN, content="User keeps bees")

    assert as_user == (
        "Memory is not reachable right now; answer without it and do not retry.",
        [status("Memory unavailable — the model answers without it")],
    )
    assert as_admin[0] == as_user[0]
    line = as_admin[1][0]["data"]["description"]
    assert line.startswith(
        "Memory unavailable — the model answers without it · for the admin: cannot reach the "
        f"memory service at {url}"
    )


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (StubReply(status=401, json={"detail": "bad key"}), "refused the api_key valve (HTTP 401)"),
        (
            StubReply(status=404, json={"detail": "Not Found"}, service_version=None),
            "is not the memory service",
        ),
        (StubReply(status=404, json={"detail": "Not Found"}), "has no /v1/tools/forget (HTTP 404)"),
        (StubReply(json={"unexpected": True}), "the service's answer has another shape"),
    ],
)
async def test_a_wrong_key_address_or_version_is_misconfigured(
    reply: StubReply, cause: str
) -> None:
    with MemoryServiceStub(lambda _request: reply) as stub:
        answer, events = await _call(
            _tools(stub.url), "memory_forget", user=ADMIN, memory_id="k7m2qa"
        )

    assert answer == "Memory is not set up correctly; answer without it and do not retry."
    line = events[0]["data"]["description"]
    assert line.startswith(
        "Memory is not set up correctly (please tell your admin) · for the admin: "
    )
    assert cause in line


async def test_no_user_no_call(service: Any) -> None:
    answer, events = await _call(_tools(service.url), "memory_search", user=None, query="bees")

    assert service.requests == []
    assert answer == "Memory is not available here: the user is not known."
    assert events == [status("Memory is not available here")]


async def test_a_long_memory_is_shortened_in_the_status_line() -> None:
    long = "User " + "likes bees and " * 20

    def added(_request: RecordedRequest) -> StubReply:
        memory = {**MEMORY, "content": long}
        return StubReply(
            json={"status": "added", "text": f"Remembered: {long}", "memories": [memory]}
        )

    with MemoryServiceStub(added) as stub:
        _, events = await _call(_tools(stub.url), "memory_add", content=long)

    line = events[0]["data"]["description"]
    assert line.startswith("Remembered: User likes bees") and line.endswith("…")
    assert len(line) == len("Remembered: ") + 80
