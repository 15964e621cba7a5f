"""LLMClient asks for JSON in the strongest structured-output mode an endpoint accepts and
remembers it (service/llm/structured.py), over real HTTP to the stand-in."""

from __future__ import annotations

from typing import Any

import pytest

from service.errors import LLMUnavailable
from service.llm.client import LLMClient
from testkit.llm_stub import LLMStub, StubReply

SCHEMA = {"type": "object", "properties": {"operations": {"type": "array"}}}
MESSAGES = [{"role": "user", "content": "hello"}]


def _kind(request: dict[str, Any]) -> str:
    fmt = request.get("response_format")
    if fmt is None:
        return "off"
    if fmt["type"] == "json_schema":
        return "json_schema"
    return "schema_object" if "schema" in fmt else "json_object"


def _accepting(*accepted: str, status: int = 400) -> Any:
    """A server that answers `status` naming response_format to the other modes (a request
    without response_format always works)."""

    def respond(request: dict[str, Any]) -> str | StubReply:
        if _kind(request) in (*accepted, "off"):
            return '{"operations": []}'
        return StubReply(text="response_format: unsupported type", status=status)

    return respond


@pytest.mark.parametrize(
    ("accepted", "status", "tried"),
    [
        (("json_schema",), 400, ["json_schema"]),
        (("schema_object",), 422, ["json_schema", "schema_object"]),
        # llama-cpp-python 0.3.36: "500 … ('body', 'response_format', 'type') … Input should
        # be 'text' or 'json_object'"
        (("schema_object",), 500, ["json_schema", "schema_object"]),
        (("json_object",), 400, ["json_schema", "schema_object", "json_object"]),
        (("off",), 400, ["json_schema", "schema_object", "json_object", "off"]),
    ],
)
async def test_auto_steps_down_to_the_first_accepted_mode_and_stays_there(
    accepted: tuple[str, ...], status: int, tried: list[str]
) -> None:
    with LLMStub(responder=_accepting(*accepted, status=status)) as stub:
        client = LLMClient(base_url=stub.base_url, model="m", api_key=None)
        try:
            assert await client.complete(MESSAGES, json_answer=True, schema=SCHEMA) == (
                '{"operations": []}'
            )
            assert [_kind(r) for r in stub.requests] == tried
            stub.clear_requests()
            await client.complete(MESSAGES, json_answer=True, schema=SCHEMA)
            assert [_kind(r) for r in stub.requests] == [tried[-1]]
            # a JSON answer without a schema gets json_object at most; a text answer none
            stub.clear_requests()
            await client.complete(MESSAGES, json_answer=True)
            await client.complete(MESSAGES)
            if "json_object" in tried:
                without = ["json_object"] if "json_object" in accepted else ["off"]
            else:
                without = ["json_object", "off"]
            assert [_kind(r) for r in stub.requests] == [*without, "off"]
            # the schema modes it took are still used
            stub.clear_requests()
            await client.complete(MESSAGES, json_answer=True, schema=SCHEMA)
            assert [_kind(r) for r in stub.requests] == [tried[-1]]
        finally:
            await client.aclose()


async def test_a_fixed_mode_and_an_error_about_something_else_are_not_retried() -> None:
    with LLMStub(responder=_accepting("json_object")) as stub:
        fixed = LLMClient(
            base_url=stub.base_url, model="m", api_key=None, structured_output="json_schema"
        )
        try:
            with pytest.raises(LLMUnavailable, match="400"):
                await fixed.complete(MESSAGES, json_answer=True, schema=SCHEMA)
            assert [_kind(r) for r in stub.requests] == ["json_schema"]
        finally:
            await fixed.aclose()
    with LLMStub(responder=lambda _: StubReply(text="model overloaded", status=500)) as stub:
        auto = LLMClient(base_url=stub.base_url, model="m", api_key=None)
        try:
            with pytest.raises(LLMUnavailable):
                await auto.complete(MESSAGES, json_answer=True, schema=SCHEMA)
            assert len(stub.requests) == 1
        finally:
            await auto.aclose()


async def test_json_mode_off_sends_no_response_format() -> None:
    with LLMStub(responder=lambda _: "{}") as stub:
        client = LLMClient(base_url=stub.base_url, model="m", api_key=None, json_mode=False)
        try:
            await client.complete(MESSAGES, json_answer=True, schema=SCHEMA)
            assert [_kind(r) for r in stub.requests] == ["off"]
        finally:
            await client.aclose()
