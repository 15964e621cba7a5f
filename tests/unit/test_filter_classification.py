"""Chat kinds (DESIGN §2) and the turns the filter must leave alone."""

import json

import pytest

from testkit.filter_loader import load_filter
from tests.support.emitter import EventRecorder
from tests.support.memory_stub import TEST_TIMEOUT_S, MemoryServiceStub

classify_chat = load_filter().classify_chat

SAVED_ID = "7f0c2d4e-0000-4000-8000-000000000001"


@pytest.mark.parametrize(
    ("chat_id", "metadata", "kind"),
    [
        (SAVED_ID, {}, "saved"),
        (SAVED_ID, {"session_id": "sid-1", "internal": False, "automation_id": None}, "saved"),
        ("temporary:sid-1", {}, "temporary"),
        ("local:sid-1", {}, "temporary"),
        ("channel:ch-1", {"session_id": "channel:ch-1"}, "channel"),
        ("", {}, "api"),
        (None, {}, "api"),
        ("   ", {}, "api"),
        (SAVED_ID, {"task": "title_generation"}, "task"),
        ("", {"task": "context_compaction"}, "task"),
        (SAVED_ID, {"session_id": "automation:a-1"}, "automated"),
        (SAVED_ID, {"session_id": "subagent:" + SAVED_ID}, "automated"),
        (SAVED_ID, {"session_id": "timer:" + SAVED_ID}, "automated"),
        (SAVED_ID, {"internal": True}, "automated"),
        (SAVED_ID, {"automation_id": "a-1"}, "automated"),
        ("temporary:sid-1", {"automation_id": "a-1"}, "automated"),
        ("", {"session_id": "automation:a-1"}, "automated"),
        (SAVED_ID, {"task": "tags_generation", "session_id": "automation:a-1"}, "task"),
        (SAVED_ID, None, "saved"),
    ],
)
def test_classify_chat(chat_id, metadata, kind):
    assert classify_chat(chat_id, metadata) == kind


def _body() -> dict:
    return {
        "model": "m",
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "hello"},
        ],
        "features": {"memory": True},
    }


def _outlet_body(chat_id: str, session_id: str | None = None) -> dict:
    return {
        "model": "m",
        "chat_id": chat_id,
        "session_id": session_id,
        "id": "a-2",
        "messages": [
            {"id": "u-1", "role": "user", "content": "hello", "timestamp": 1683554160},
            {"id": "a-2", "role": "assistant", "content": "hi"},
        ],
    }


SKIPPED_TURNS = [
    pytest.param(SAVED_ID, {"task": "title_generation"}, id="task"),
    pytest.param(
        SAVED_ID, {"session_id": "automation:a-1", "automation_id": "a-1"}, id="automation"
    ),
    pytest.param(SAVED_ID, {"session_id": "subagent:x", "internal": True}, id="subagent"),
    pytest.param(SAVED_ID, {"session_id": "timer:x"}, id="timer"),
    pytest.param("", {"session_id": None}, id="api"),
]


@pytest.mark.parametrize(("chat_id", "metadata"), SKIPPED_TURNS)
async def test_inlet_returns_untouched_body_without_calling_the_service(chat_id, metadata):
    module = load_filter()
    emitter = EventRecorder()
    with MemoryServiceStub() as stub:
        memory_filter = module.Filter()
        memory_filter.valves = module.Filter.Valves(
            service_url=stub.url, inlet_timeout_s=TEST_TIMEOUT_S
        )
        body = _body()
        before = json.dumps(body, sort_keys=True)

        result = await memory_filter.inlet(
            body,
            __user__={"id": "u-1", "name": "Alice"},
            __metadata__={"chat_id": chat_id, **metadata},
            __event_emitter__=emitter,
            __chat_id__=chat_id,
        )

    assert result is body
    assert json.dumps(result, sort_keys=True) == before
    assert stub.requests == []
    assert emitter.events == []


@pytest.mark.parametrize(("chat_id", "metadata"), SKIPPED_TURNS)
async def test_outlet_returns_untouched_body_without_calling_the_service(chat_id, metadata):
    module = load_filter()
    with MemoryServiceStub() as stub:
        memory_filter = module.Filter()
        memory_filter.valves = module.Filter.Valves(
            service_url=stub.url, inlet_timeout_s=TEST_TIMEOUT_S
        )
        body = _outlet_body(chat_id)
        before = json.dumps(body, sort_keys=True)

        result = await memory_filter.outlet(
            body, __user__={"id": "u-1"}, __metadata__={"chat_id": chat_id, **metadata}
        )

    assert result is body
    assert json.dumps(result, sort_keys=True) == before
    assert stub.requests == []


async def test_outlet_reads_an_automation_session_from_the_body_when_metadata_is_missing():
    module = load_filter()
    with MemoryServiceStub() as stub:
        memory_filter = module.Filter()
        memory_filter.valves = module.Filter.Valves(
            service_url=stub.url, inlet_timeout_s=TEST_TIMEOUT_S
        )
        body = _outlet_body(SAVED_ID, session_id="automation:a-1")

        result = await memory_filter.outlet(body, __user__={"id": "u-1"})

    assert result is body
    assert stub.requests == []


@pytest.mark.parametrize(
    "valves",
    [
        pytest.param("instance", id="instance"),
        pytest.param({"enabled": False}, id="dict"),
    ],
)
async def test_a_user_who_switched_memory_off_gets_an_untouched_body(valves):
    module = load_filter()
    if valves == "instance":
        valves = module.Filter.UserValves(enabled=False)
    with MemoryServiceStub() as stub:
        memory_filter = module.Filter()
        memory_filter.valves = module.Filter.Valves(
            service_url=stub.url, inlet_timeout_s=TEST_TIMEOUT_S
        )
        body = _body()
        before = json.dumps(body, sort_keys=True)
        user = {"id": "u-1", "valves": valves}

        inlet_result = await memory_filter.inlet(
            body, __user__=user, __metadata__={"chat_id": SAVED_ID}, __chat_id__=SAVED_ID
        )
        outlet_body = _outlet_body(SAVED_ID)
        outlet_before = json.dumps(outlet_body, sort_keys=True)
        outlet_result = await memory_filter.outlet(outlet_body, __user__=user)

    assert inlet_result is body
    assert json.dumps(inlet_result, sort_keys=True) == before
    assert outlet_result is outlet_body
    assert json.dumps(outlet_result, sort_keys=True) == outlet_before
    assert stub.requests == []


async def test_a_turn_without_a_user_is_left_alone():
    module = load_filter()
    with MemoryServiceStub() as stub:
        memory_filter = module.Filter()
        memory_filter.valves = module.Filter.Valves(
            service_url=stub.url, inlet_timeout_s=TEST_TIMEOUT_S
        )
        body = _body()
        before = json.dumps(body, sort_keys=True)

        result = await memory_filter.inlet(body, __metadata__={"chat_id": SAVED_ID})

    assert result is body
    assert json.dumps(result, sort_keys=True) == before
    assert stub.requests == []
