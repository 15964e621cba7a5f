"""The counts one process adds to the installation's totals (flows/counters.py): each count
once, the latest LLM failure named until an extraction finishes after it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from service import observability
from service.errors import LLMUnavailable
from service.flows import counters
from service.storage.db import Database


async def test_counts_are_added_once_and_the_latest_llm_failure_is_named(database_url: str):
    db = Database.connect(database_url, pool_size=2)
    rt: Any = SimpleNamespace(db=db)
    try:
        await counters.flush(rt)  # what earlier tests of this process counted
        before = await counters.totals(rt)
        counters.record_llm_failure(LLMUnavailable("the LLM answered HTTP 503: overloaded"))
        observability.record_extraction("already_done")  # no LLM call: not an answer
        assert await counters.flush(rt) == 2
        assert await counters.flush(rt) == 0  # nothing new: nothing added twice
        after = await counters.totals(rt)
        assert (
            after[("llm_failures", "http_503")] == before.get(("llm_failures", "http_503"), 0) + 1
        )
        failure = await counters.last_llm_failure(rt)
        assert failure is not None
        assert failure.sentence == "the LLM answered HTTP 503"  # no body text of the answer

        observability.record_extraction("written")  # the LLM answered since
        await counters.flush(rt)
        assert await counters.last_llm_failure(rt) is None
    finally:
        await db.dispose()


def test_llm_failures_are_named_by_a_fixed_cause() -> None:
    assert counters.llm_failure(LLMUnavailable("the LLM answered HTTP 429: slow down")) == (
        "http_429",
        "the LLM answered HTTP 429",
    )
    unreachable = LLMUnavailable("the LLM at http://llm:8000/v1 is unreachable: ConnectError()")
    assert counters.llm_failure(unreachable) == ("unreachable", "the LLM was unreachable")
    odd = LLMUnavailable("the LLM answer is not a chat completion")
    assert counters.llm_failure(odd)[0] == "bad_answer"
