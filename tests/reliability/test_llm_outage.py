"""An LLM outage longer than the give-up age: turns are retried with backoff, then parked as
failed, listed and retryable. (A shorter one drains by itself: test_long_outage.py.)"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from typer.testing import CliRunner

from service.cli.main import app
from testkit.extraction_replies import echo_fact
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until
from tests.reliability.support import metric, record_figures, scrape

ATTEMPTS = 3
CHAT = {"user_id": "u-outage", "chat_id": "chat-outage", "kind": "saved"}


class _Outage:
    """A responder that fails (the stub answers HTTP 500) until `restore` is called."""

    def __init__(self) -> None:
        self.down = True
        self.calls: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        with self._lock:
            self.calls.append(time.monotonic())
        if self.down:
            raise ConnectionError("the model server is down")
        return echo_fact(request)


def _wait_failed(live: LiveService, count: int, timeout_s: float = 60) -> dict[str, Any]:
    def failed() -> dict[str, Any] | None:
        status: dict[str, Any] = live.client.get("/v1/status").json()
        return status if status["turns_failed"] >= count else None

    found = wait_until(failed, what=f"{count} failed turns", timeout_s=timeout_s)
    assert found is not None
    return found


@pytest.fixture
def outage() -> _Outage:
    return _Outage()


@pytest.fixture
def failing(service_factory, outage: _Outage):  # type: ignore[no-untyped-def]
    with LLMStub(responder=outage) as stub:
        live = service_factory(
            LLM_BASE_URL=stub.base_url,
            LLM_MODEL="stub-model",
            # waits of 2 s and 4 s add up to the give-up age at the third attempt
            MEMORY_EXTRACTION_RETRY_BASE_S="2",
            MEMORY_EXTRACTION_GIVE_UP_S="6",
        )
        yield live, stub


def test_an_llm_outage_is_retried_with_backoff_then_the_turn_is_parked_and_listed(
    failing,
    outage: _Outage,  # type: ignore[no-untyped-def]
) -> None:
    live, _ = failing
    before = scrape(live)
    answer = live.client.post(
        "/v1/turns",
        json={
            "chat": CHAT,
            "user_message_id": "m1",
            "user_message": "I repair clocks for a living, fact-clocks.",
        },
    )
    assert answer.json()["status"] == "queued"
    status = _wait_failed(live, 1)
    assert (status["turns_failed"], status["turns_queued"], status["turns_done"]) == (1, 0, 0)
    assert status["status"] == "up to date; 1 turn failed"
    assert len(outage.calls) == ATTEMPTS
    waits = [b - a for a, b in zip(outage.calls, outage.calls[1:], strict=False)]
    assert all(w >= 1.5 for w in waits) and waits[-1] > waits[0], waits  # backoff grows
    (item,) = live.client.get("/v1/admin/turns?status=failed").json()["items"]
    assert (item["user_id"], item["chat_id"], item["user_message_id"]) == (
        "u-outage",
        "chat-outage",
        "m1",
    )
    assert item["error"].startswith("the LLM answered HTTP 500")
    assert "clocks" not in str(item)
    after = scrape(live)
    assert (
        metric(after, "extraction_outcomes_total", outcome="gave_up")
        - metric(before, "extraction_outcomes_total", outcome="gave_up")
        == 1
    )
    assert metric(after, "turns", status="failed") == 1
    listing = CliRunner().invoke(
        app, ["turns", "list", "--url", live.base_url], env={"MEMORY_API_KEY": live.api_key}
    )
    assert listing.exit_code == 0, listing.output
    (row, total) = listing.output.splitlines()
    assert row.startswith(f"{item['id']}\tu-outage\tchat-outage\t")
    assert row.endswith("\ttexts erased\t" + item["error"]) or row.endswith(
        "\tretryable\t" + item["error"]
    )
    assert total == "1 failed turns"
    record_figures(
        "llm_outage",
        {
            "attempts": len(outage.calls),
            "waits_s": [round(w, 1) for w in waits],
            "turn_parked_as_failed": 1,
            "listed_by_admin_api": 1,
        },
    )


def test_a_parked_turn_is_extracted_once_after_a_retry(
    failing,
    outage: _Outage,  # type: ignore[no-untyped-def]
) -> None:
    live, _ = failing
    live.client.post(
        "/v1/turns",
        json={
            "chat": CHAT,
            "user_message_id": "m1",
            "user_message": "I repair clocks, fact-clocks.",
        },
    )
    _wait_failed(live, 1)
    (item,) = live.client.get("/v1/admin/turns?status=failed").json()["items"]
    assert item["retryable"] is True
    outage.down = False
    answer = live.client.post(f"/v1/admin/turns/{item['id']}/retry")
    assert answer.status_code == 202
    status = live.wait_for_extraction()
    assert (status["turns_done"], status["turns_failed"]) == (1, 0)
    items = live.client.get("/v1/users/u-outage/memories").json()["items"]
    assert [m["content"] for m in items] == ["User mentioned fact-clocks"]
    again = live.client.post(f"/v1/admin/turns/{item['id']}/retry")
    assert again.status_code == 409
