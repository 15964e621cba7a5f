"""LLM_MAX_ANSWER_TOKENS caps every call's max_tokens (a small model that runs on to its
max_tokens costs minutes of CPU per call)."""

from __future__ import annotations

from service.llm.client import LLMClient
from testkit.llm_stub import LLMStub


async def test_every_call_asks_for_at_most_the_ceiling() -> None:
    with LLMStub(responder=lambda _: "{}") as stub:
        capped = LLMClient(base_url=stub.base_url, model="m", api_key=None, max_answer_tokens=300)
        free = LLMClient(base_url=stub.base_url, model="m", api_key=None)
        await capped.complete([{"role": "user", "content": "hi"}], max_tokens=1_500)
        await capped.complete([{"role": "user", "content": "hi"}], max_tokens=200)
        await free.complete([{"role": "user", "content": "hi"}], max_tokens=1_500)
        await capped.aclose()
        await free.aclose()
        assert [r["max_tokens"] for r in stub.requests] == [300, 200, 1_500]
