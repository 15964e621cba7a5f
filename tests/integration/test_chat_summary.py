"""The rolling summary of a long chat: built from new messages only, linked by message hash,
read only in its chat; short chats get none and keep no texts."""

from __future__ import annotations

from typing import Any

import psycopg

from service.core.batching import turn_tokens
from testkit.extraction_replies import (
    by_message,
    chat_summary_lines,
    is_chat_summary_request,
    new_op,
    with_chat_summaries,
)
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until, wait_until_async

CHAT = {"user_id": "ana", "user_name": "Ana", "chat_id": "trip-chat", "kind": "saved"}
LINES = [
    "I'm planning a trip to Peru in June.",
    "We land in Lima on June 3.",
    "Then we take the train to Cusco.",
    "The hotel in Cusco is booked for four nights.",
    "After Cusco we hike the Inca Trail.",
    "My brother Tomás joins us for the hike.",
    "We still need travel insurance.",
    "The flight home leaves on June 20.",
]
REPLY = "Noted."


def _post(live: LiveService, index: int, *, chat: dict[str, Any] = CHAT) -> dict[str, Any]:
    response = live.client.post(
        "/v1/turns",
        json={
            "chat": chat,
            "user_message_id": f"m{index}",
            "user_message": LINES[index],
            "assistant_message": REPLY,
            "occurred_at": f"2026-05-{index + 1:02d}T09:00:00Z",
        },
    )
    assert response.status_code == 202, response.text
    return response.json()


def _summary_requests(llm: LLMStub) -> list[dict[str, Any]]:
    return [r for r in llm.requests if is_chat_summary_request(r)]


def _block(live: LiveService, chat: dict[str, Any], message: str) -> str:
    return str(
        live.client.post("/v1/context", json={"chat": chat, "message": message}).json()["block"]
    )


def _summary_text(*indices: int) -> str:
    return " ".join(f"Ana: {LINES[i]}" for i in indices)


async def _scalar_rows(conn: psycopg.AsyncConnection, sql: str) -> list[tuple[Any, ...]]:
    return await (await conn.execute(sql)).fetchall()


def _versions(database_url: str) -> int:
    """Summary versions committed for the chat (0 before the first)."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT versions FROM chat_summaries WHERE chat_id = %s", (CHAT["chat_id"],)
        ).fetchone()
    return int(row[0]) if row else 0


async def test_a_long_chat_keeps_a_rolling_summary_built_from_new_messages_only(
    service_factory,
    database_url: str,
    db_conn: psycopg.AsyncConnection,  # type: ignore[no-untyped-def]
) -> None:
    tokens = [turn_tokens(line, REPLY) for line in LINES]
    threshold = max(sum(tokens[0:2]), sum(tokens[4:6])) + 1
    assert threshold <= min(sum(tokens[0:4]), sum(tokens[4:8]))
    with LLMStub(responder=with_chat_summaries(by_message({}))) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="2",
            MEMORY_BATCH_QUIET_S="3600",
            MEMORY_CHAT_SUMMARY_TOKENS=str(threshold),
        )

        for pair in ((0, 1), (2, 3), (4, 5), (6, 7)):
            for i in pair:
                _post(live, i)
            live.wait_for_extraction()
            # the job folds right after its batch commits: wait for that commit too
            wanted = {1: 0, 3: 1, 5: 1, 7: 2}[pair[1]]
            wait_until(
                lambda w=wanted: _versions(database_url) == w and len(_summary_requests(llm)) == w,
                what=f"summary version {wanted}",
            )
        first, second = _summary_requests(llm)
        in_chat = _block(live, CHAT, "When do we land in Lima and where is the hotel?")
        why = live.client.post("/v1/commands", json={"chat": CHAT, "command": "/memory why"})
        elsewhere = _block(
            live,
            {**CHAT, "chat_id": "other-chat"},
            "When do we land in Lima and where is the hotel?",
        )
    assert chat_summary_lines(first) == [
        line for i in range(4) for line in (("Ana", LINES[i]), ("assistant", REPLY))
    ]
    assert "<chat_summary></chat_summary>" in first["messages"][-1]["content"]
    assert [t for s, t in chat_summary_lines(second) if s == "Ana"] == LINES[4:8]
    assert (
        f"<chat_summary>{_summary_text(0, 1, 2, 3)}</chat_summary>"
        in second["messages"][-1]["content"]
    )
    memories = await _scalar_rows(
        db_conn,
        (
            "SELECT status, content, owner_kind, owner_id, bank, source_kind, source_message_id "
            "FROM memories ORDER BY seq"
        ),
    )
    assert memories == [
        (
            "superseded",
            _summary_text(0, 1, 2, 3),
            "chat",
            "trip-chat",
            "chat",
            "chat_summary",
            "m3",
        ),
        ("active", _summary_text(*range(8)), "chat", "trip-chat", "chat", "chat_summary", "m7"),
    ]
    link = await _scalar_rows(
        db_conn,
        (
            "SELECT s.last_message_hash = t.message_hash, t.user_message_id, s.turns_covered, "
            "s.versions, s.memory_id = m.id FROM chat_summaries s JOIN turns t "
            "ON t.id = s.last_turn_id JOIN memories m ON m.status = 'active'"
        ),
    )
    assert link == [(True, "m7", 8, 2, True)]
    texts = await _scalar_rows(db_conn, "SELECT count(*) FROM turns WHERE payload ? 'texts'")
    assert texts == [(0,)]
    assert _summary_text(*range(8)) in in_chat
    assert "confidence 0.90, summary of this chat" in why.json()["text"]
    assert "Lima" not in elsewhere


async def test_a_short_chat_gets_no_summary_and_keeps_no_texts_once_quiet(
    service_factory,
    db_conn: psycopg.AsyncConnection,  # type: ignore[no-untyped-def]
) -> None:
    with LLMStub(responder=with_chat_summaries(by_message({}))) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="100",
            MEMORY_BATCH_QUIET_S="2",
        )
        _post(live, 0)
        _post(live, 1)
        live.wait_for_extraction()

        async def texts_left() -> int:
            rows = await _scalar_rows(db_conn, "SELECT count(*) FROM turns WHERE payload ? 'texts'")
            return int(rows[0][0])

        async def no_texts_left() -> bool:
            return await texts_left() == 0

        await wait_until_async(no_texts_left, what="the quiet chat's texts to be dropped")
        assert await texts_left() == 0
        assert _summary_requests(llm) == []
    assert await _scalar_rows(db_conn, "SELECT count(*) FROM chat_summaries") == [(0,)]


def test_a_quiet_chat_folds_what_its_summary_does_not_cover_yet(
    service_factory,
    database_url: str,  # type: ignore[no-untyped-def]
) -> None:
    threshold = sum(turn_tokens(line, REPLY) for line in LINES[:2])
    with LLMStub(responder=with_chat_summaries(by_message({}))) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="2",
            MEMORY_BATCH_QUIET_S="4",
            MEMORY_CHAT_SUMMARY_TOKENS=str(threshold),
        )
        _post(live, 0)
        _post(live, 1)
        wait_until(lambda: _versions(database_url) == 1, what="first summary")
        _post(live, 2)  # a single turn: no batch, no summary until the chat goes quiet
        wait_until(lambda: _versions(database_url) == 2, what="summary of the quiet chat")
        last = _summary_requests(llm)[-1]
    assert len(_summary_requests(llm)) == 2
    assert [t for s, t in chat_summary_lines(last) if s == "Ana"] == [LINES[2]]
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT turns_covered FROM chat_summaries").fetchall() == [(3,)]


def test_a_forgotten_summary_is_not_carried_into_the_next_version(
    service_factory,
    database_url: str,  # type: ignore[no-untyped-def]
) -> None:
    threshold = sum(turn_tokens(line, REPLY) for line in LINES[:2])
    with LLMStub(responder=with_chat_summaries(by_message({}))) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="2",
            MEMORY_BATCH_QUIET_S="3600",
            MEMORY_CHAT_SUMMARY_TOKENS=str(threshold),
        )
        _post(live, 0)
        _post(live, 1)
        wait_until(lambda: _versions(database_url) == 1, what="first summary")
        assert live.client.delete("/v1/chats/trip-chat/memories").json() == {"forgotten": 1}
        _post(live, 2)
        _post(live, 3)
        wait_until(lambda: len(_summary_requests(llm)) == 2, what="second summary")
        second = _summary_requests(llm)[-1]
    assert "<chat_summary></chat_summary>" in second["messages"][-1]["content"]
    assert LINES[0] not in second["messages"][-1]["content"]


def test_forgetting_a_fact_the_summary_took_in_forgets_the_summary_too(
    service_factory,
    database_url: str,  # type: ignore[no-untyped-def]
) -> None:
    """DESIGN §4: forgetting reaches summaries; the next version starts from new messages."""
    threshold = sum(turn_tokens(line, REPLY) for line in LINES[:2])
    rules = {"Peru": [new_op("User plans a trip to Peru in June")]}
    with LLMStub(responder=with_chat_summaries(by_message(rules))) as llm:
        live = service_factory(
            LLM_BASE_URL=llm.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="2",
            MEMORY_BATCH_QUIET_S="3600",
            MEMORY_CHAT_SUMMARY_TOKENS=str(threshold),
        )
        _post(live, 0)
        _post(live, 1)
        wait_until(lambda: _versions(database_url) == 1, what="first summary")
        assert "Peru" in _block(live, CHAT, "Where am I travelling in June?")
        (fact,) = live.client.get("/v1/users/ana/memories").json()["items"]
        assert live.client.delete(f"/v1/users/ana/memories/{fact['id']}").status_code == 204
        after_forget = _block(live, CHAT, "Where am I travelling in June?")
        _post(live, 2)
        _post(live, 3)
        wait_until(lambda: _versions(database_url) == 2, what="second summary")
        third = _summary_requests(llm)[-1]
    assert "Peru" not in after_forget
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT status, content FROM memories WHERE source_kind = 'chat_summary' ORDER BY seq"
        ).fetchall()
        peru = conn.execute(
            "SELECT count(*) FROM turns WHERE payload::text LIKE '%Peru%'"
        ).fetchone()
    assert rows == [("deleted", ""), ("active", _summary_text(2, 3))]
    assert "<chat_summary></chat_summary>" in third["messages"][-1]["content"]
    assert peru == (0,)
