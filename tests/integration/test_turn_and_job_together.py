"""A turn is saved together with its jobs or not at all (one transaction)."""

from __future__ import annotations

import psycopg

from testkit.live_service import LiveService

CHAT = {"user_id": "u1", "chat_id": "chat-1", "kind": "saved"}
TURN = {"chat": CHAT, "user_message_id": "m1", "user_message": "Remember that I keep bees."}


async def test_a_turn_whose_job_cannot_be_queued_is_not_saved_and_a_retry_queues_it(
    service: LiveService, db_conn: psycopg.AsyncConnection
) -> None:
    # the job queue breaks: its defer function is gone
    await db_conn.execute(
        "ALTER FUNCTION procrastinate_defer_jobs_v1 RENAME TO procrastinate_defer_jobs_v1_away"
    )
    failed = service.client.post("/v1/turns", json=TURN)
    assert failed.status_code == 503, failed.text
    assert failed.json()["detail"] == (
        "the job queue did not take the turn; nothing was saved, hand it over again"
    )
    assert await (await db_conn.execute("SELECT count(*) FROM turns")).fetchone() == (0,)
    await db_conn.execute(
        "ALTER FUNCTION procrastinate_defer_jobs_v1_away RENAME TO procrastinate_defer_jobs_v1"
    )
    retried = service.client.post("/v1/turns", json=TURN)
    assert (retried.status_code, retried.json()["status"]) == (202, "queued")
    turns = await (await db_conn.execute("SELECT id, status FROM turns")).fetchall()
    assert [status for _, status in turns] == ["queued"]
    jobs = await (
        await db_conn.execute(
            "SELECT task_name, queueing_lock FROM procrastinate_jobs ORDER BY queueing_lock"
        )
    ).fetchall()
    turn_id = turns[0][0]
    assert jobs == [("extract_turn", f"due:{turn_id}"), ("extract_quiet_chat", f"quiet:{turn_id}")]
