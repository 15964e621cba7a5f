"""Operations: /metrics, the failed-turn listing and retry, structured logs."""

from __future__ import annotations

import json
import logging

import httpx
import psycopg

from service import observability
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from tests.reliability.support import metric, scrape

SECRET_USER = "user-7f3a-private"
CHAT = {"user_id": SECRET_USER, "chat_id": "chat-ops", "kind": "saved"}


def _turn(message: str, msg_id: str) -> dict[str, object]:
    return {
        "chat": CHAT,
        "user_message_id": msg_id,
        "user_message": message,
        "assistant_message": "Noted.",
    }


def test_metrics_need_the_key_and_name_every_series(live: LiveService) -> None:
    assert httpx.get(f"{live.base_url}/metrics").status_code == 401
    samples = scrape(live)
    names = {name for name, _ in samples}
    for expected in (
        "inlet_latency_seconds_count",
        "inlet_timeouts_total",
        "extraction_outcomes_total",
        "extraction_parse_failures_total",
        "extraction_dropped_operations_total",
        "turns",
        "job_queue_depth",
        "memories_without_vector",
        "database_up",
        "embedding_cache_hits_total",
        "embedding_cache_misses_total",
        "relevance_cache_hits_total",
        "relevance_cache_misses_total",
        "http_requests_total",
    ):
        assert expected in names, expected
    assert metric(samples, "database_up") == 1


def test_labels_never_carry_user_ids_or_memory_content(live: LiveService) -> None:
    content = "User keeps a sourdough starter named Clint"
    live.client.post(f"/v1/users/{SECRET_USER}/memories", json={"content": content})
    live.client.post("/v1/context", json={"chat": CHAT, "message": "What bread do I bake?"})
    live.client.post("/v1/turns", json=_turn("I bake on Sundays, fact-ops-1.", "m1"))
    live.wait_for_extraction()
    text = live.client.get("/metrics").text
    assert SECRET_USER not in text and "sourdough" not in text and "chat-ops" not in text
    samples = scrape(live)
    assert (
        metric(
            samples,
            "http_requests_total",
            route="/v1/users/{user_id}/memories",
            method="POST",
            status="201",
        )
        >= 1
    )
    assert metric(samples, "inlet_latency_seconds_count") >= 1
    assert metric(samples, "turns", status="done") == 1
    assert metric(samples, "extraction_outcomes_total", outcome="written") >= 1


async def test_a_turn_whose_answer_stays_invalid_counts_one_parse_failure_and_is_listed(
    service_factory,
    db_conn: psycopg.AsyncConnection,  # type: ignore[no-untyped-def]
) -> None:
    """Case 7 (c): one repair retry, no partial write, `extraction_parse_failures_total` +1."""
    truncated = '{"operations":[{"op":"NEW","content":"User works nights'
    with LLMStub(responder=lambda _: truncated) as stub:
        live = service_factory(LLM_BASE_URL=stub.base_url, LLM_MODEL="m")
        before = scrape(live)
        live.client.post("/v1/turns", json=_turn("I'm a night-shift nurse, fact-n1.", "m1"))
        status = live.wait_for_extraction()
        asked = len(stub.requests)
    after = scrape(live)
    assert (status["turns_failed"], asked) == (1, 2)
    assert (
        metric(after, "extraction_parse_failures_total")
        - metric(before, "extraction_parse_failures_total")
        == 1
    )
    assert (
        metric(after, "extraction_outcomes_total", outcome="invalid_output")
        - metric(before, "extraction_outcomes_total", outcome="invalid_output")
        == 1
    )
    assert metric(after, "turns", status="failed") == 1
    listing = live.client.get("/v1/admin/turns", params={"status": "failed"}).json()
    assert listing["total"] == 1
    (item,) = listing["items"]
    assert (item["user_id"], item["user_message_id"], item["status"]) == (
        SECRET_USER,
        "m1",
        "failed",
    )
    assert item["error"] == "the answer is truncated before its first complete item"
    assert "nurse" not in json.dumps(listing)
    memories = await (await db_conn.execute("SELECT count(*) FROM memories")).fetchone()
    assert memories == (0,)


def test_retry_answers_404_for_an_unknown_turn_and_409_for_a_turn_that_did_not_fail(
    live: LiveService,
) -> None:
    assert live.client.post("/v1/admin/turns/999/retry").json() == {
        "detail": "no turn with this id"
    }
    live.client.post("/v1/turns", json=_turn("I keep bees, fact-bees.", "m1"))
    live.wait_for_extraction()
    (done,) = live.client.get("/v1/admin/turns", params={"status": "done"}).json()["items"]
    answer = live.client.post(f"/v1/admin/turns/{done['id']}/retry")
    assert (answer.status_code, answer.json()) == (
        409,
        {"detail": "this turn has not failed; there is nothing to retry"},
    )
    assert live.client.post("/v1/admin/turns/0/retry").status_code == 422
    assert httpx.post(f"{live.base_url}/v1/admin/turns/1/retry").status_code == 401


def test_json_logs_are_one_object_a_line_without_secrets() -> None:
    record = logging.LogRecord(
        "service.test",
        logging.WARNING,
        __file__,
        1,
        "LLM call failed with key %s and header Authorization: Bearer %s",
        ("sk-abcdefghijklmnopqrstuvwx", "tok_0123456789abcdef"),
        None,
    )
    record.turn_id = 12
    line = observability.JsonFormatter().format(record)
    entry = json.loads(line)
    assert entry["level"] == "warning" and entry["logger"] == "service.test"
    assert entry["turn_id"] == 12
    assert entry["message"] == (
        "LLM call failed with key [redacted key] and header Authorization: Bearer [redacted]"
    )
    assert "\n" not in line
