"""Passwords typed in Open WebUI, through the real filter file and the commands pipe, over
real HTTP to the real service: never sent to the LLM, stored, audited or injected."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from bench.chat_harness import FilterHarness, SavedChat, load_filter_instance
from testkit.extraction_replies import new_op, new_user_message
from testkit.filter_loader import load_filter
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

PIPE_PATH = load_filter.__defaults__[0].parent / "memory_commands.py"  # type: ignore[index]
TIMESTAMP = 1_780_000_000  # 2026-05-28
MESSAGES = {
    "Setting up the router. password: hunter2horse": "hunter2horse",
    "Our home wifi password: Tr0ub4dor3x, the guests keep asking": "Tr0ub4dor3x",
    "My bank pin: 7391, do not let me forget it": "7391",
    "Mein Passwort ist Sommer2024! für das NAS": "Sommer2024!",
    "The gym locker code is 5521 and I go on Mondays": "5521",
}
TEXTS = {
    "turns": "payload::text",
    "memories": "content",
    "memory_events": "coalesce(before::text, '') || coalesce(after::text, '')",
    "procrastinate_jobs": "args::text",
}


def _write_down(request: dict[str, Any]) -> str:
    """An extraction LLM that keeps the message as the fact, secret and all."""
    message = new_user_message(request)
    return json.dumps({"operations": [new_op(f"User noted: {message}")] if message else []})


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(responder=_write_down) as stub:
        yield stub


@pytest.fixture
def live(service_factory: Callable[..., LiveService], llm: LLMStub) -> LiveService:
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")


@pytest.fixture
def harness(live: LiveService) -> FilterHarness:
    instance = load_filter_instance()
    instance.valves = instance.Valves(
        service_url=live.base_url,
        api_key=live.api_key,
        inlet_timeout_s=10,
        outlet_timeout_s=10,
        command_timeout_s=10,
    )
    return FilterHarness(instance)


async def _say(harness: FilterHarness, chat: SavedChat, text: str) -> str:
    """One full turn (inlet → model → outlet); returns the system text the model received."""
    body, metadata, user_id, assistant_id = chat.inlet_request(text)
    seen = await harness.inlet(chat, body, metadata)
    outlet = chat.record_turn(
        user_message_id=user_id, text=text, assistant_id=assistant_id, reply="OK."
    )
    await harness.outlet(chat, outlet, metadata)
    return seen.system_text


async def _holding(db_conn: psycopg.AsyncConnection, secret: str) -> list[str]:
    tables = []
    for table, text in TEXTS.items():
        row = await (
            await db_conn.execute(
                f"SELECT count(*) FROM {table} WHERE {text} LIKE %s", (f"%{secret}%",)
            )
        ).fetchone()
        if row and row[0]:
            tables.append(table)
    return tables


async def test_passwords_typed_in_a_chat_never_reach_the_llm_the_tables_or_a_later_prompt(
    harness: FilterHarness, live: LiveService, llm: LLMStub, db_conn: psycopg.AsyncConnection
) -> None:
    user = harness.make_user(user_id="pw-user", name="Robin")
    chat = SavedChat(user=user, timestamp_s=TIMESTAMP)
    for message in MESSAGES:
        await _say(harness, chat, message)
    # as soon as the turns are accepted (extraction may not have run yet): redacted only
    ledger = {s: t for s in MESSAGES.values() if (t := await _holding(db_conn, s))}
    assert ledger == {}
    assert live.wait_for_extraction()["turns_done"] == len(MESSAGES)
    later = await _say(harness, SavedChat(user=user, timestamp_s=TIMESTAMP), "What did I note?")
    sent = json.dumps(llm.requests, ensure_ascii=False)
    leaks = {
        s: where
        for s in MESSAGES.values()
        if (where := [*(["llm"] if s in sent else []), *await _holding(db_conn, s)]) or s in later
    }
    assert leaks == {}
    # the redacted facts stay useful: the most relevant of them is injected, placeholder and all
    assert "- [2026-05-28] User noted: " in later and "[redacted " in later


async def test_memory_add_of_a_password_through_the_commands_pipe_stores_it_redacted(
    harness: FilterHarness, live: LiveService, db_conn: psycopg.AsyncConnection
) -> None:
    user = harness.make_user(user_id="pw-adder", name="Robin")
    chat = SavedChat(user=user, timestamp_s=TIMESTAMP)
    pipe = load_filter(PIPE_PATH).Pipe()
    answers = []
    for command in ("/memory add my password: hunter2horse for the NAS", "/memory add PIN=6612"):
        body, metadata, _, _ = chat.inlet_request(command)
        routed = await harness.inlet(chat, body, metadata)
        answers.append(await pipe.pipe(routed.body, __user__=user, __metadata__=metadata))
    assert answers[0].startswith("Remembered in Personal:")
    assert answers[1] == (
        "That didn't work: that text is only a password, key or code; memories never keep those."
    )
    items = live.client.get("/v1/users/pw-adder/memories").json()["items"]
    assert [m["content"] for m in items] == ["User's password: [redacted password] for the NAS"]
    assert await _holding(db_conn, "hunter2horse") == []
    assert await _holding(db_conn, "6612") == []
