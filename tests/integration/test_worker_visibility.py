"""A separate worker's outcomes and LLM failures show in the API replica's /metrics and
/v1/status (issue 29 item 3: with the LLM answering 503, /v1/status said only "3 turns
waiting" and no /metrics showed an extraction, since workers serve no HTTP)."""

from __future__ import annotations

import secrets
import threading
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from testkit.extraction_replies import echo_fact
from testkit.llm_stub import LLMStub, StubReply
from testkit.waiting import wait_until
from tests.integration.test_scale_out import _Process, _start, _turn

TURNS = 3


class _FailingThenAnswering:
    """An LLM that answers 503 until `recover()`, then extracts one fact per turn."""

    def __init__(self) -> None:
        self.recovered = threading.Event()

    def __call__(self, request: dict[str, Any]) -> str | StubReply:
        if not self.recovered.is_set():
            return StubReply(text="the model is overloaded", status=503)
        return echo_fact(request)


def _metrics(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


def test_a_separate_workers_llm_failures_and_outcomes_show_in_the_api(
    database_url: str, tmp_path: Path
) -> None:
    key = secrets.token_urlsafe(16)
    responder = _FailingThenAnswering()
    fast_retries = {
        "MEMORY_EXTRACTION_RETRY_BASE_S": "1",
        "MEMORY_EXTRACTION_RETRY_MAX_WAIT_S": "2",
    }
    with LLMStub(responder=responder) as llm:
        api = _start(
            "api", command="serve", database_url=database_url, llm=llm, key=key,
            tmp_path=tmp_path, env=fast_retries,
        )  # fmt: skip
        worker: _Process | None = None
        try:
            api.wait_ready(120)
            headers = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=api.url, headers=headers, timeout=30) as client:
                for i in range(TURNS):
                    assert client.post("/v1/turns", json=_turn(i)).json()["status"] == "queued"
                worker = _start(
                    "worker", command="worker", database_url=database_url, llm=llm, key=key,
                    tmp_path=tmp_path, env=fast_retries,
                )  # fmt: skip

                def status() -> str:
                    assert worker is not None and worker.running, worker and worker.log_tail()
                    return str(client.get("/v1/status").json()["status"])

                wait_until(
                    lambda: "the LLM answered HTTP 503 at " in status(),
                    what="the API's status naming the worker's LLM failure",
                    timeout_s=120,
                    interval_s=0.25,
                )
                line = status()
                assert line.endswith(f"UTC; {TURNS} turns waiting"), line
                failures = _metrics(client)[
                    ("llm_failures_all_processes_total", (("cause", "http_503"),))
                ]
                assert failures >= 1
                # the API process itself called no LLM: its own counter stays at 0
                own = _metrics(client).get(("llm_failures_total", (("cause", "http_503"),)), 0.0)
                assert own == 0.0

                responder.recovered.set()
                wait_until(
                    lambda: client.get("/v1/status").json()["turns_done"] == TURNS,
                    what=f"{TURNS} turns done once the LLM answers",
                    timeout_s=120,
                    interval_s=0.25,
                )
                wait_until(
                    lambda: (
                        _metrics(client).get(
                            ("extraction_outcomes_all_processes_total", (("outcome", "written"),)),
                            0.0,
                        )
                        >= 1
                    ),
                    what="the worker's outcomes in the API's /metrics",
                    timeout_s=60,
                    interval_s=0.25,
                )
                assert status() == "up to date"
        finally:
            if worker is not None:
                worker.terminate(30)
            api.terminate(30)
