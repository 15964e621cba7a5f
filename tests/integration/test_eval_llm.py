"""The evaluation's answer/judge client (bench/eval_llm.py) against the local stand-in over
real HTTP: what is retried, how long it waits, what is counted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.eval_llm import ChatClient, Endpoint, EndpointFailed
from testkit.extraction_replies import in_sequence
from testkit.llm_stub import LLMStub, StubReply

MESSAGES = [{"role": "user", "content": "<question>Where is Ada moving?</question>"}]


@pytest.fixture
def stub() -> Iterator[LLMStub]:
    with LLMStub() as server:
        yield server


def _client(stub: LLMStub, waits: list[float], **settings: Any) -> ChatClient:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    endpoint = Endpoint(base_url=stub.base_url, model="m", **({"backoff_s": 1.0} | settings))
    return ChatClient(endpoint, sleep=sleep)


async def test_rate_limits_and_server_errors_are_retried_with_doubling_waits(
    stub: LLMStub,
) -> None:
    stub.responder = in_sequence([StubReply(status=429), StubReply(status=503), "Porto"])
    waits: list[float] = []
    client = _client(stub, waits)

    done = await client.complete(MESSAGES)
    await client.aclose()

    assert (done.text, done.attempts, done.failures) == ("Porto", 3, ["http 429", "http 503"])
    assert waits == [1.0, 2.0]
    assert (done.prompt_tokens, done.completion_tokens, done.usage_reported) == (4, 1, True)
    assert client.counts() == {
        "calls": 1,
        "retries": 2,
        "timeouts": 0,
        "http_errors": {"http 429": 1, "http 503": 1},
        "failed_calls": 0,
    }


async def test_a_retry_after_header_is_waited_for_but_capped(stub: LLMStub) -> None:
    stub.responder = in_sequence(
        [
            StubReply(status=429, headers={"Retry-After": "7"}),
            StubReply(status=429, headers={"Retry-After": "3600"}),
            StubReply(status=429, headers={"Retry-After": "soon"}),
            "ok",
        ]
    )
    waits: list[float] = []
    client = _client(stub, waits, backoff_s=0.5)

    done = await client.complete(MESSAGES)
    await client.aclose()

    # 7 s as asked; an hour capped at 60 s; an unreadable header leaves the backoff (2 s)
    assert (done.attempts, waits) == (4, [7.0, 60.0, 2.0])


async def test_a_model_that_never_answers_in_time_fails_after_every_try(stub: LLMStub) -> None:
    stub.responder = lambda _: StubReply(delay_s=1.5, text="late")
    waits: list[float] = []
    client = _client(stub, waits, timeout_s=0.3, attempts=3)

    with pytest.raises(EndpointFailed) as failed:
        await client.complete(MESSAGES)
    await client.aclose()

    assert (failed.value.reason, failed.value.failures) == ("timeout", ["timeout"] * 3)
    assert waits == [1.0, 2.0]
    assert (client.timeouts, client.retries, client.failed_calls) == (3, 2, 1)


async def test_a_wrong_model_name_is_not_asked_again(stub: LLMStub) -> None:
    stub.responder = lambda _: StubReply(status=404, text="no such model")
    waits: list[float] = []
    client = _client(stub, waits)

    with pytest.raises(EndpointFailed) as failed:
        await client.complete(MESSAGES)
    await client.aclose()

    assert (failed.value.reason, failed.value.attempts, waits) == ("http 404", 1, [])
    assert len(stub.requests) == 1
