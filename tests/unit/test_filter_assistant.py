"""Assistant Memory in the filter: which models keep their own memory (the valve, the
workspace model's tag), what the service is told, and that a turn keeps the inlet's
decision even when an admin marks or unmarks the model while it answers."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.filter_loader import load_filter
from tests.support.memory_stub import (
    TEST_TIMEOUT_S,
    MemoryServiceStub,
    StubReply,
    default_responder,
)

CHAT_ID = "7f0c2d4e-0000-4000-8000-000000000001"
ALICE = {"id": "u-123", "name": "Alice", "role": "user"}
CODER = {
    "id": "coder",
    "name": "Coding Helper",
    "info": {"id": "coder", "base_model_id": "stub-model", "meta": {"tags": []}},
}


def _tagged(model: dict[str, Any], *tags: str) -> dict[str, Any]:
    return {**model, "info": {**model["info"], "meta": {"tags": [{"name": t} for t in tags]}}}


def _filter(module: Any, url: str, **valves: Any) -> Any:
    memory_filter = module.Filter()
    # the stub gets TEST_TIMEOUT_S unless a test sets a valve: a busy machine must not turn an
    # answer into "unavailable" (the valves' own timing is tested in test_fail_open)
    patient = {"inlet_timeout_s": TEST_TIMEOUT_S, "outlet_timeout_s": TEST_TIMEOUT_S}
    memory_filter.valves = module.Filter.Valves(
        service_url=url, api_key="key-1", **{**patient, **valves}
    )
    return memory_filter


def _body(model: str = "coder", text: str = "Which editor do I use?") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}]}


def _outlet_body(model: str = "coder") -> dict[str, Any]:
    return {
        "model": model,
        "chat_id": CHAT_ID,
        "id": "a-1",
        "messages": [
            {"id": "u-1", "role": "user", "content": "I use helix now.", "timestamp": 1_700_000},
            {"id": "a-1", "role": "assistant", "content": "Noted."},
        ],
    }


def _responder(request: Any) -> StubReply:
    if request.path == "/v1/commands":
        return StubReply(json={"command": "list", "text": "listed"})
    return default_responder(request)


async def _inlet(memory_filter: Any, body: dict[str, Any], model: Any, metadata: dict) -> None:
    await memory_filter.inlet(
        body,
        __user__=ALICE,
        __metadata__=metadata,
        __chat_id__=CHAT_ID,
        __model__=model,
    )


def _chat_sent(stub: MemoryServiceStub, path: str) -> dict[str, Any]:
    return next(r.body["chat"] for r in stub.requests if r.path == path)


@pytest.mark.parametrize(
    ("valve", "model", "expected"),
    [
        ("coder", CODER, {"assistant_id": "coder", "assistant_name": "Coding Helper"}),
        ("cod*", CODER, {"assistant_id": "coder", "assistant_name": "Coding Helper"}),
        (
            "",
            _tagged(CODER, "Own-Memory"),
            {"assistant_id": "coder", "assistant_name": "Coding Helper"},
        ),
        ("coder", None, {"assistant_id": "coder", "assistant_name": "coder"}),
        ("", CODER, {}),
        ("", _tagged(CODER, "work"), {}),
        ("writer, coders", CODER, {}),
        # a tag read from another model's details never marks this one
        ("", {**_tagged(CODER, "own-memory"), "id": "other"}, {}),
    ],
    ids=[
        "valve",
        "valve prefix",
        "tag",
        "valve without model details",
        "unmarked",
        "other tag",
        "other ids",
        "tag of another model",
    ],
)
async def test_the_service_is_told_the_assistant_only_when_an_admin_marked_it(
    valve: str, model: Any, expected: dict[str, str]
) -> None:
    module = load_filter()
    with MemoryServiceStub(responder=_responder) as stub:
        f = _filter(module, stub.url, assistant_memory_models=valve)
        await _inlet(f, _body(), model, {"chat_id": CHAT_ID})
    chat = _chat_sent(stub, "/v1/context")
    assert {k: v for k, v in chat.items() if k.startswith("assistant")} == expected


async def test_a_memory_command_in_an_assistant_chat_is_run_for_that_assistant() -> None:
    module = load_filter()
    with MemoryServiceStub(responder=_responder) as stub:
        f = _filter(module, stub.url, assistant_memory_models="coder")
        body = _body(text="/memory list")
        await _inlet(f, body, CODER, {"chat_id": CHAT_ID})
    chat = _chat_sent(stub, "/v1/commands")
    assert (chat["assistant_id"], chat["assistant_name"]) == ("coder", "Coding Helper")
    assert body["model"] == "memory_commands"


async def test_no_memory_models_wins_over_assistant_memory() -> None:
    module = load_filter()
    with MemoryServiceStub(responder=_responder) as stub:
        f = _filter(module, stub.url, assistant_memory_models="coder", no_memory_models="coder")
        await _inlet(f, _body(), CODER, {"chat_id": CHAT_ID})
    assert stub.paths() == []


@pytest.mark.parametrize("marked_at_inlet", [True, False])
async def test_a_turn_keeps_the_inlets_decision_when_an_admin_changes_it_meanwhile(
    marked_at_inlet: bool,
) -> None:
    """Marked (or unmarked) while the model answered: the turn's outlet hands the turn over
    as its inlet read it, so what was said to the assistant never lands in Personal."""
    module = load_filter()
    metadata: dict[str, Any] = {"chat_id": CHAT_ID}
    with MemoryServiceStub(responder=_responder) as stub:
        f = _filter(module, stub.url, assistant_memory_models="coder" if marked_at_inlet else "")
        await _inlet(f, _body(), CODER, metadata)
        # the admin saves the valve while the LLM answers; Open WebUI applies it to the outlet
        f.valves = module.Filter.Valves(
            service_url=stub.url,
            api_key="key-1",
            assistant_memory_models="" if marked_at_inlet else "coder",
        )
        await f.outlet(_outlet_body(), __user__=ALICE, __metadata__=metadata, __model__=CODER)
    inlet_chat = _chat_sent(stub, "/v1/context")
    outlet_chat = _chat_sent(stub, "/v1/turns")
    assert ("assistant_id" in inlet_chat) is marked_at_inlet
    assert ("assistant_id" in outlet_chat) is marked_at_inlet
    assert outlet_chat.get("assistant_id") == inlet_chat.get("assistant_id")


async def test_an_outlet_without_its_inlets_decision_decides_from_the_model() -> None:
    """Through /api/chat/completed the metadata is reduced: the outlet reads the model."""
    module = load_filter()
    with MemoryServiceStub(responder=_responder) as stub:
        f = _filter(module, stub.url)
        await f.outlet(
            _outlet_body(),
            __user__=ALICE,
            __metadata__={"chat_id": CHAT_ID},
            __model__=_tagged(CODER, "own-memory"),
        )
    chat = _chat_sent(stub, "/v1/turns")
    assert (chat["assistant_id"], chat["assistant_name"]) == ("coder", "Coding Helper")


@pytest.mark.parametrize(("valve", "native_off"), [("coder", True), ("", None)])
async def test_open_webuis_own_memory_stays_out_of_an_assistant_chat_whatever_the_valve(
    valve: str, native_off: bool | None
) -> None:
    module = load_filter()
    with MemoryServiceStub(responder=_responder) as stub:
        f = _filter(module, stub.url, assistant_memory_models=valve, disable_native_memory=False)
        body = {**_body(), "features": {"memory": True}}
        await _inlet(f, body, CODER, {"chat_id": CHAT_ID})
    assert body["features"]["memory"] is (False if native_off else True)
