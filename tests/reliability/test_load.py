"""A short loopback load (mixed inlet, outlet, commands): no errors, no leaks, nothing lost.

`make reliability` runs the longer version (`bench/load_test.py`, 20 users x 30 s)."""

from __future__ import annotations

import pytest

from bench.load_test import echo_facts, run_load
from testkit.llm_stub import LLMStub
from tests.reliability.support import env_int, record_figures

REQUESTS = 60


@pytest.mark.timeout(1200)  # backstops only: 60 requests, then a drain of up to 600 s
async def test_concurrent_users_never_see_each_others_memories(service_factory) -> None:  # type: ignore[no-untyped-def]
    with LLMStub(responder=echo_facts) as llm:
        live = service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")
        # a number of requests, not a number of seconds: a loaded machine sends them more
        # slowly, never fewer (the clock is only a backstop)
        report = await run_load(
            live.base_url,
            live.api_key,
            users=env_int("RELIABILITY_LOAD_USERS", 8),
            duration_s=env_int("RELIABILITY_LOAD_S", 240),
            max_requests=REQUESTS,
            think_s=0.1,
            drain_s=600,
            # errors here mean wrong answers, not slow ones: a busy machine answers late, and
            # the latency figures belong to `make reliability` (bench/load_test.py's report)
            timeout_s=60,
        )
    figures = report.as_dict()
    record_figures("load_short", figures)
    assert figures["requests"] >= REQUESTS, figures
    assert (figures["errors"], figures["leaks"]) == (0, 0), figures
    assert figures["drained"], figures
    assert figures["facts_accepted"] > 0
    assert (figures["facts_lost"], figures["facts_duplicated"]) == (0, 0), figures
