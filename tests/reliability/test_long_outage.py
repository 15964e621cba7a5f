"""A long LLM outage with turns arriving: nothing is parked, the backlog drains by itself.

The LLM stand-in answers HTTP 500 for `RELIABILITY_OUTAGE_S` seconds (default 40, longer
than every wait of the former five attempts added up; `make reliability` runs 180) while
`RELIABILITY_OUTAGE_TURNS` turns arrive, spread over the outage, in four chats of four users.
Then it comes back, and nobody touches anything: the test reports how long the backlog takes
to drain. The backoff is shortened (1 s doubling to at most 5 s) so the drain is quick; the
production schedule (4 s doubling to 5 min, give up after a day) is the same code.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from testkit.extraction_replies import echo_fact
from testkit.llm_stub import LLMStub
from tests.reliability.support import env_int, record_figures

MAX_WAIT_S = 5


class _Outage:
    """Answers HTTP 500 (the stub turns the exception into one) until `restore`."""

    def __init__(self) -> None:
        self.down = True
        self.failed_calls = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        if self.down:
            with self._lock:
                self.failed_calls += 1
            raise ConnectionError("the model server is down")
        return echo_fact(request)


def test_a_long_llm_outage_parks_nothing_and_the_backlog_drains_by_itself(
    service_factory,  # type: ignore[no-untyped-def]
) -> None:
    outage_s = env_int("RELIABILITY_OUTAGE_S", 40)
    count = env_int("RELIABILITY_OUTAGE_TURNS", 12)
    outage = _Outage()
    with LLMStub(responder=outage) as stub:
        live = service_factory(
            LLM_BASE_URL=stub.base_url,
            LLM_MODEL="stub-model",
            MEMORY_BATCH_MESSAGES="1",  # every turn is a batch of its own, due at once
            MEMORY_BATCH_QUIET_S="3600",
            MEMORY_EXTRACTION_RETRY_BASE_S="1",
            MEMORY_EXTRACTION_RETRY_MAX_WAIT_S=str(MAX_WAIT_S),
        )
        started = time.monotonic()
        for i in range(count):
            # arrivals spread over the outage (pacing the scenario, not waiting for a result)
            time.sleep(max(0.0, started + i * outage_s / count - time.monotonic()))
            user = f"u-outage-{i % 4}"
            turn = {
                "chat": {"user_id": user, "chat_id": f"chat-{user}", "kind": "saved"},
                "user_message_id": f"m{i}",
                "user_message": f"Note this down: fact-outage-{i}.",
            }
            assert live.client.post("/v1/turns", json=turn).json()["status"] == "queued"
        time.sleep(max(0.0, started + outage_s - time.monotonic()))
        during = live.client.get("/v1/status").json()
        outage.down = False
        restored = time.monotonic()
        status = live.wait_for_extraction(timeout_s=MAX_WAIT_S + 120)
        drain_s = time.monotonic() - restored
        facts = sorted(
            m["content"]
            for i in range(4)
            for m in live.client.get(f"/v1/users/u-outage-{i}/memories").json()["items"]
        )
    assert (during["turns_failed"], during["turns_queued"]) == (0, count)
    assert (status["turns_done"], status["turns_failed"], status["turns_queued"]) == (count, 0, 0)
    assert facts == sorted(f"User mentioned fact-outage-{i}" for i in range(count))
    assert outage.failed_calls >= count  # every turn was tried during the outage
    record_figures(
        "long_outage",
        {
            "outage_s": outage_s,
            "turns_arrived": count,
            "failed_llm_calls_during_outage": outage.failed_calls,
            "turns_failed": status["turns_failed"],
            "max_wait_s": MAX_WAIT_S,
            "backlog_drained_s": round(drain_s, 1),
        },
    )
