"""Extraction batches over real HTTP, PostgreSQL and job queue: thresholds, the quiet check,
"remember that …", message hashes, lookback, senders of a shared chat, restarts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from service.core.batching import turn_tokens
from testkit.extraction_replies import by_message, new_op, new_user_messages
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until, wait_until_async
from tests.reliability.support import metric, scrape

CHAT = {"user_id": "ana", "user_name": "Ana", "chat_id": "chat-batch", "kind": "saved"}
LATER = "turn saved; extracted with this chat's next batch"
NOW = "turn saved for extraction"
FACTS = [
    ("I moved to Lyon last spring.", "User lives in Lyon"),
    ("My cat is called Miso.", "User has a cat named Miso"),
    ("I play the cello in an orchestra.", "User plays the cello"),
    ("I work night shifts at the hospital.", "User works night shifts"),
    ("My sister Jane lives in Oslo.", "User has a sister named Jane"),
    ("I'm allergic to peanuts.", "User is allergic to peanuts"),
]
RULES = {text.split()[-1].rstrip("."): [new_op(fact)] for text, fact in FACTS}


def _post(
    live: LiveService,
    text: str,
    message_id: str,
    *,
    chat: dict[str, Any] = CHAT,
    day: int = 8,
    history: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    response = live.client.post(
        "/v1/turns",
        json={
            "chat": chat,
            "user_message_id": message_id,
            "user_message": text,
            "assistant_message": "Noted.",
            "history": history or [],
            "occurred_at": f"2026-05-{day:02d}T09:00:00Z",
        },
    )
    assert response.status_code == 202, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _extraction_requests(llm: LLMStub) -> list[list[str]]:
    """The new user messages of each extraction request, by ref order (other requests, such
    as the core profile's, left out)."""
    return [[text for _, text in found] for r in llm.requests if (found := new_user_messages(r))]


async def _rows(conn: psycopg.AsyncConnection, sql: str) -> list[tuple[Any, ...]]:
    return await (await conn.execute(sql)).fetchall()


async def test_five_messages_make_one_extraction_call(
    service_factory: Callable[..., LiveService],
    db_conn: psycopg.AsyncConnection,
) -> None:
    with LLMStub(responder=by_message(RULES)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="5",
            MEMORY_BATCH_QUIET_S="3600",
        )
        answers = [
            _post(live, text, f"m{i}", day=i + 1)["detail"] for i, (text, _) in enumerate(FACTS[:4])
        ]
        assert answers == [LATER] * 4
        # each waiting turn has its quiet check scheduled in the queue, and no job runs yet
        assert await _rows(
            db_conn,
            (
                "SELECT task_name, count(*) FROM procrastinate_jobs WHERE status = 'todo' "
                "AND scheduled_at > now() + interval '3000 seconds' GROUP BY 1"
            ),
        ) == [("extract_quiet_chat", 4)]
        assert await _rows(
            db_conn, "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'extract_turn'"
        ) == [(0,)]
        samples = scrape(live)
        assert metric(samples, "job_queue_depth", queue="extraction", status="scheduled") == 4
        assert metric(samples, "job_queue_depth", queue="extraction", status="todo") == 0
        assert _post(live, FACTS[4][0], "m4", day=5)["detail"] == NOW
        status = live.wait_for_extraction()
        requests = _extraction_requests(llm)
    assert (status["turns_done"], status["memories_active"]) == (5, 5)
    assert requests == [[text for text, _ in FACTS[:5]]]
    stored = await _rows(
        db_conn,
        "SELECT content, source_message_id, "
        "to_char(created_at, 'YYYY-MM-DD') FROM memories ORDER BY seq",
    )
    assert stored == [
        (fact, f"m{i}", f"2026-05-{i + 1:02d}") for i, (_, fact) in enumerate(FACTS[:5])
    ]
    # the message and reply stay for the chat's summary; the earlier messages sent with them go
    assert (
        await _rows(
            db_conn,
            "SELECT memories_written, payload ? 'texts', "
            "payload -> 'texts' ? 'history' FROM turns ORDER BY id",
        )
        == [(1, True, False)] * 5
    )


async def test_long_messages_reach_the_token_threshold_first(
    service_factory: Callable[..., LiveService],
) -> None:
    first = "I restore old sailing boats; " * 12
    second = "my current project is a 1962 wooden sloop called Petrel; " * 8
    tokens = turn_tokens(first, "Noted."), turn_tokens(second, "Noted.")
    threshold = tokens[0] + tokens[1]
    with LLMStub(responder=by_message({})) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="100",
            MEMORY_BATCH_QUIET_S="3600",
            MEMORY_BATCH_TOKENS=str(threshold),
        )
        assert _post(live, first, "m1")["detail"] == LATER
        assert _post(live, second, "m2")["detail"] == NOW
        live.wait_for_extraction()
        requests = _extraction_requests(llm)
    assert requests == [[first, second]]


def test_a_quiet_chat_is_extracted_by_its_scheduled_check(
    service_factory: Callable[..., LiveService],
) -> None:
    with LLMStub(responder=by_message(RULES)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="100",
            MEMORY_BATCH_QUIET_S="3",
        )
        assert [_post(live, FACTS[i][0], f"m{i}")["detail"] for i in (0, 1)] == [LATER] * 2
        status = live.wait_for_extraction()
        requests = _extraction_requests(llm)
    assert requests == [[FACTS[0][0], FACTS[1][0]]]
    assert (status["turns_done"], status["memories_active"]) == (2, 2)


def test_remember_that_is_extracted_at_once(service_factory: Callable[..., LiveService]) -> None:
    with LLMStub(responder=by_message(RULES)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="100",
            MEMORY_BATCH_QUIET_S="3600",
        )
        assert _post(live, FACTS[1][0], "m1")["detail"] == LATER
        assert _post(live, "Remember that I'm allergic to peanuts.", "m2")["detail"] == NOW
        status = live.wait_for_extraction()
        requests = _extraction_requests(llm)
        items = live.client.get("/v1/users/ana/memories").json()["items"]
    assert requests == [[FACTS[1][0], "Remember that I'm allergic to peanuts."]]
    assert status["turns_done"] == 2
    assert sorted(m["content"] for m in items) == [
        "User has a cat named Miso",
        "User is allergic to peanuts",
    ]


def test_the_same_messages_handed_over_again_are_processed_once(
    service_factory: Callable[..., LiveService],
) -> None:
    """A replay under new message ids (e.g. a client that lost them) is recognised by hash."""
    with LLMStub(responder=by_message(RULES)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="2",
            MEMORY_BATCH_QUIET_S="3600",
        )

        def hand_over(prefix: str) -> list[str]:
            history: list[dict[str, str]] = []
            answers = []
            for i, (text, _) in enumerate(FACTS[:4]):
                answers.append(_post(live, text, f"{prefix}{i}", history=history[-6:])["status"])
                history += [
                    {"role": "user", "content": text},
                    {"role": "assistant", "content": "Noted."},
                ]
            return answers

        assert hand_over("first-") == ["queued"] * 4
        status = live.wait_for_extraction()
        assert hand_over("again-") == ["duplicate"] * 4
        after = live.client.get("/v1/status").json()
        requests = _extraction_requests(llm)
    assert requests == [[FACTS[0][0], FACTS[1][0]], [FACTS[2][0], FACTS[3][0]]]
    assert (status["turns_done"], status["memories_active"]) == (4, 4)
    assert (after["turns_done"], after["turns_queued"], after["memories_active"]) == (4, 0, 4)


def test_the_newest_turn_waits_while_the_chat_is_active(
    service_factory: Callable[..., LiveService],
) -> None:
    with LLMStub(responder=by_message(RULES)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="2",
            MEMORY_BATCH_LOOKBACK_TURNS="1",
            MEMORY_BATCH_QUIET_S="3",
        )
        details = [_post(live, FACTS[i][0], f"m{i}")["detail"] for i in range(3)]
        live.wait_for_extraction()
        requests = _extraction_requests(llm)
    assert details == [LATER, LATER, NOW]
    assert requests == [[FACTS[0][0], FACTS[1][0]], [FACTS[2][0]]]  # the last when quiet


def test_senders_of_a_shared_chat_are_batched_apart(
    service_factory: Callable[..., LiveService],
) -> None:
    """DESIGN §3: one batch, one sender; facts land in the speaker's own Interaction Patterns."""
    rules = {
        "bullet": [new_op("Prefers bullet points", bank="interaction_patterns")],
        "tables": [new_op("Prefers tables", bank="interaction_patterns")],
        "short": [new_op("Prefers short answers", bank="interaction_patterns")],
        "sources": [new_op("Wants sources cited", bank="interaction_patterns")],
    }
    channel = {
        "chat_id": "channel:c9",
        "kind": "channel",
        "collaborative": True,
        "collaborative_reason": "channel",
    }
    ann = {**channel, "user_id": "ann", "user_name": "Ann"}
    ben = {**channel, "user_id": "ben", "user_name": "Ben"}
    with LLMStub(responder=by_message(rules)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="2",
            MEMORY_BATCH_QUIET_S="3600",
        )
        _post(live, "I like bullet points.", "a1", chat=ann)
        _post(live, "I like tables.", "b1", chat=ben)
        _post(live, "Keep it short.", "a2", chat=ann)
        _post(live, "Always cite sources.", "b2", chat=ben)
        live.wait_for_extraction()
        prompts = sorted(r["messages"][-1]["content"] for r in llm.requests if new_user_messages(r))
        banks = {
            user: sorted(
                (m["bank"], m["content"])
                for m in live.client.get(f"/v1/users/{user}/memories").json()["items"]
            )
            for user in ("ann", "ben")
        }
    assert len(prompts) == 2
    assert "<user_name>Ann</user_name>" in prompts[0] and "bullet" in prompts[0]
    assert "tables" not in prompts[0] and "sources" not in prompts[0]
    assert "<user_name>Ben</user_name>" in prompts[1] and "sources" in prompts[1]
    assert "bullet" not in prompts[1] and "short" not in prompts[1]
    assert "personal" not in prompts[0].split("Banks you may use:")[1].split("\n")[0]
    assert banks == {
        "ann": [
            ("interaction_patterns", "Prefers bullet points"),
            ("interaction_patterns", "Prefers short answers"),
        ],
        "ben": [
            ("interaction_patterns", "Prefers tables"),
            ("interaction_patterns", "Wants sources cited"),
        ],
    }


def test_a_waiting_batch_survives_a_restart_and_is_extracted_once(
    service_factory: Callable[..., LiveService],
) -> None:
    with LLMStub(responder=by_message(RULES)) as llm:
        settings = {
            "LLM_BASE_URL": llm.base_url,
            "LLM_MODEL": "m",
            "MEMORY_BATCH_MESSAGES": "100",
            "MEMORY_BATCH_QUIET_S": "1",
        }
        first = service_factory(**settings, MEMORY_RUN_WORKERS="false")
        assert [_post(first, FACTS[i][0], f"m{i}")["status"] for i in (0, 1)] == ["queued"] * 2
        first.stop()
        second = service_factory(**settings)
        status = second.wait_for_extraction()
        assert _post(second, FACTS[0][0], "m0")["status"] == "duplicate"
        requests = _extraction_requests(llm)
    assert requests == [[FACTS[0][0], FACTS[1][0]]]
    assert (status["turns_done"], status["memories_active"]) == (2, 2)


async def _quiet_checks_done(db_conn: psycopg.AsyncConnection) -> bool:
    waiting = await _rows(
        db_conn,
        "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'extract_quiet_chat' "
        "AND status IN ('todo', 'doing')",
    )
    return waiting == [(0,)]


async def test_waiting_turns_of_a_deleted_chat_or_user_are_never_extracted(
    service_factory: Callable[..., LiveService],
    db_conn: psycopg.AsyncConnection,
) -> None:
    other = {**CHAT, "chat_id": "chat-kept"}
    with LLMStub(responder=by_message(RULES)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="5",
            MEMORY_BATCH_QUIET_S="1",
        )
        assert _post(live, FACTS[0][0], "d1")["detail"] == LATER
        assert _post(live, FACTS[1][0], "k1", chat=other)["detail"] == LATER
        assert live.client.delete("/v1/chats/chat-batch/memories").status_code == 200
        # the kept chat goes quiet and is extracted; the deleted one never is
        wait_until(
            lambda: any(
                "cat named Miso" in m["content"]
                for m in live.client.get("/v1/users/ana/memories").json()["items"]
            ),
            what="the kept chat's extraction",
        )
        assert _extraction_requests(llm) == [[FACTS[1][0]]]
        assert await _rows(db_conn, "SELECT chat_id, status FROM turns ORDER BY id") == [
            ("chat-batch", "discarded"),
            ("chat-kept", "done"),
        ]
        assert await _rows(
            db_conn, "SELECT payload ? 'texts' FROM turns WHERE chat_id = 'chat-batch'"
        ) == [(False,)]

        # a deleted user: a turn still waiting is discarded with everything else
        assert _post(live, FACTS[2][0], "k2", chat=other)["detail"] == LATER
        assert live.client.delete("/v1/users/ana/memories").json() == {"forgotten": 1}
        # past the quiet period: its check ran and found nothing waiting
        await wait_until_async(
            lambda: _quiet_checks_done(db_conn), what="the deleted user's quiet check"
        )
        live.wait_for_extraction()
        assert _extraction_requests(llm) == [[FACTS[1][0]]]
        assert live.client.get("/v1/users/ana/memories").json()["items"] == []
        assert (await _rows(db_conn, "SELECT status FROM turns WHERE user_message_id = 'k2'")) == [
            ("discarded",)
        ]


async def test_forget_all_also_forgets_what_was_said_but_not_extracted_yet(
    service_factory: Callable[..., LiveService],
    db_conn: psycopg.AsyncConnection,
) -> None:
    with LLMStub(responder=by_message(RULES)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="5",
            MEMORY_BATCH_QUIET_S="3600",
        )
        live.client.post("/v1/users/ana/memories", json={"content": "User likes tea"})
        assert _post(live, FACTS[0][0], "w1")["detail"] == LATER
        asked = live.client.post(
            "/v1/commands", json={"chat": CHAT, "command": "/memory forget all"}
        ).json()["text"]
        code = asked.rsplit("`/memory forget all ", 1)[1].rstrip("`")
        done = live.client.post(
            "/v1/commands", json={"chat": CHAT, "command": f"/memory forget all {code}"}
        ).json()["text"]
        assert done.startswith("Forgot 1 memory.")
        assert await _rows(db_conn, "SELECT status, payload ? 'texts' FROM turns") == [
            ("discarded", False)
        ]
        assert _extraction_requests(llm) == []


async def test_forget_all_with_nothing_stored_yet_forgets_what_is_still_waiting(
    service_factory: Callable[..., LiveService],
    db_conn: psycopg.AsyncConnection,
) -> None:
    """A new user states facts and runs `/memory forget all` before the batch is read: no
    memory exists yet, but nothing of what they said may be remembered later."""
    with LLMStub(responder=by_message(RULES)) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="5",
            MEMORY_BATCH_QUIET_S="3600",
        )
        assert _post(live, FACTS[0][0], "w1")["detail"] == LATER
        assert _post(live, FACTS[1][0], "w2")["detail"] == LATER
        done = live.client.post(
            "/v1/commands", json={"chat": CHAT, "command": "/memory forget all"}
        ).json()["text"]
        assert done == (
            "No memory was stored yet. The 2 messages not yet read for memories were "
            "discarded, so nothing from them will be remembered."
        )
        assert await _rows(db_conn, "SELECT status, payload ? 'texts' FROM turns") == [
            ("discarded", False),
            ("discarded", False),
        ]
        assert _extraction_requests(llm) == []
        assert live.client.get("/v1/users/ana/memories").json()["items"] == []
        again = live.client.post(
            "/v1/commands", json={"chat": CHAT, "command": "/memory forget all"}
        ).json()["text"]
        assert again == "There is nothing to forget."
