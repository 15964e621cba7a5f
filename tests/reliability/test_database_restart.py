"""The database goes away under a running service and comes back: nothing accepted is lost.

The service runs on its own embedded PostgreSQL (not the suite's shared one), which the test
stops (`pg_ctl stop -m fast`) while a turn's extraction is in flight, and starts again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pgserver
import psycopg
import pytest
from pgserver._commands import pg_ctl

from bench.chat_harness import FilterHarness, SavedChat, load_filter_instance
from testkit.extraction_replies import echo_fact
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.waiting import LoopLag, wait_until
from tests.reliability.support import metric, record_figures, scrape

CHAT = {"user_id": "u-restart", "chat_id": "chat-restart", "kind": "saved"}
RECOVERY_S = 90.0


class _Gate:
    """Holds the first extraction answer until `open()`, so a job is in flight at the stop."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.answered = threading.Event()

    def __call__(self, request: dict[str, Any]) -> str:
        self.entered.set()
        self.release.wait(timeout=60)
        try:
            return echo_fact(request)
        finally:
            self.answered.set()


@pytest.fixture
def own_postgres(pg_home: Path) -> Iterator[tuple[Any, str]]:
    server = pgserver.get_server(pg_home / "pgdata", cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE restart")
    yield server, server.get_uri("restart")
    if not server.get_postmaster_info().is_running():
        server.ensure_postgres_running()
    server.cleanup()


def _stop(server: Any) -> None:
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)


def _turn(msg_id: str, fact: str) -> dict[str, Any]:
    return {
        "chat": CHAT,
        "user_message_id": msg_id,
        "user_message": f"Please remember {fact} for me.",
    }


def _wait(predicate: Any, timeout_s: float) -> bool:
    return bool(
        wait_until(predicate, what="recovery", timeout_s=timeout_s, ignoring=(httpx.HTTPError,))
    )


@pytest.mark.timeout(600)  # three waits of up to RECOVERY_S
async def test_a_database_restart_loses_no_accepted_turn(
    own_postgres: tuple[Any, str],
    service_factory,  # type: ignore[no-untyped-def]
) -> None:
    # own_postgres first: set up before the service, so it is stopped after it
    server, url = own_postgres
    gate = _Gate()
    with LLMStub(responder=gate) as stub:
        live: LiveService = service_factory(
            DATABASE_URL=url, LLM_BASE_URL=stub.base_url, LLM_MODEL="stub-model"
        )
        assert (
            live.client.post("/v1/turns", json=_turn("m1", "fact-before")).json()["status"]
            == "queued"
        )
        assert gate.entered.wait(30), "the extraction never reached the LLM"

        _stop(server)
        stopped_at = time.monotonic()
        during = {
            "readyz": httpx.get(f"{live.base_url}/readyz", timeout=10).status_code,
            "context": live.client.post(
                "/v1/context", json={"chat": CHAT, "message": "What did I ask you to remember?"}
            ).status_code,
        }
        instance = load_filter_instance()
        instance.valves = instance.Valves(service_url=live.base_url, api_key=live.api_key)
        harness = FilterHarness(instance)
        chat = SavedChat(
            user=harness.make_user(user_id="u-restart", name="Robin"), timestamp_s=1_780_000_000
        )
        body, metadata, _, _ = chat.inlet_request("Hello!")
        async with LoopLag() as lag:
            seen = await harness.inlet(chat, body, metadata)
        assert seen.body["messages"] == [{"role": "user", "content": "Hello!"}]
        # within the default 0.8 s valve (+0.3 s), on the loop's clock (testkit/waiting)
        assert seen.elapsed_ms / 1000 - lag.lag_s <= 0.8 + 0.3, (seen.elapsed_ms, lag.lag_s)
        assert metric(scrape(live), "database_up") == 0
        gate.release.set()  # the in-flight job now meets the dead database
        wait_until(gate.answered.is_set, what="the in-flight extraction's answer")

        server.ensure_postgres_running()
        assert _wait(lambda: httpx.get(f"{live.base_url}/readyz").status_code == 200, RECOVERY_S)
        ready_s = time.monotonic() - stopped_at
        assert _wait(
            lambda: (
                live.client.post("/v1/context", json={"chat": CHAT, "message": "hello"}).status_code
                == 200
            ),
            RECOVERY_S,
        )
        assert (
            live.client.post("/v1/turns", json=_turn("m2", "fact-after")).json()["status"]
            == "queued"
        )
        assert _wait(lambda: live.client.get("/v1/status").json()["turns_done"] == 2, RECOVERY_S), (
            live.client.get("/v1/status").json()
        )
        recovered_s = time.monotonic() - stopped_at
    items = live.client.get("/v1/users/u-restart/memories").json()["items"]
    assert sorted(m["content"] for m in items) == [
        "User mentioned fact-after",
        "User mentioned fact-before",
    ]
    assert live.client.get("/v1/status").json()["turns_failed"] == 0
    assert metric(scrape(live), "database_up") == 1
    record_figures(
        "database_restart",
        {
            "during_outage_status": during,
            "ready_again_s": round(ready_s, 1),
            "all_turns_done_s": round(recovered_s, 1),
            "turns_lost": 0,
        },
    )
