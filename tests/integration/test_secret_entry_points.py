"""One redaction at every door (issue 27): each way text enters the service, fed the formats
the attacker's corpus got through with, over HTTP; afterwards no table, no LLM request and
no export holds any of them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from testkit.extraction_replies import is_chat_summary_request, new_op, new_user_messages
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until

USER = "u-doors"
CHAT = {"user_id": USER, "chat_id": "chat-doors", "kind": "saved", "user_name": "Robin"}
AT = "2025-01-01T00:00:00Z"
# (text, the secret in it): one new format per entry point, so a leak names its door
FORMATS = {
    "turn": ("the runner token is glrt-Qm3xT8vLp2Zk9Rw4Yb7N", "glrt-Qm3xT8vLp2Zk9Rw4Yb7N"),
    "turn_split": ("Falcon!maple2291", "Falcon!maple2291"),
    "memory_add": ("our wifi QR is WIFI:T:WPA;S:Home;P:sunflower77;;", "sunflower77"),
    "memory_edit": ("the .env has DB_PASSWORD=Heron_cedar41", "Heron_cedar41"),
    "api_create": (
        "the Shopify token is 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",
        "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",
    ),
    "api_edit": ("sshpass -p 'Otter#lemon88' ssh admin@nas", "Otter#lemon88"),
    "json_import": ("mot de passe de la box : Soleil-Vert-2024", "Soleil-Vert-2024"),
    "openwebui_import": ("mein Passwort ist Sonnenblume77", "Sonnenblume77"),
    "remember": ("curl -u ada:Lovelace1815 https://api.example.com", "Lovelace1815"),
    "export": (
        "mailgun key-0123456789abcdef0123456789abcdef",
        "key-0123456789abcdef0123456789abcdef",
    ),
}
PROFILE_SECRET = "xapp-1-A0123456789-1234567890123-" + "ab" * 32
TABLES = {
    "turns": "payload::text",
    "memories": "content || ' ' || tsv::text",
    "memory_events": "coalesce(before::text, '') || coalesce(after::text, '')",
    "procrastinate_jobs": "args::text",
    "profiles": "content",
}


def _answer(request: dict[str, Any]) -> str:
    """Extraction writes down each new message as it is; a profile request gets a profile
    that carries a token (an LLM repeating what it read)."""
    prompt = str(request["messages"][-1]["content"])
    if "Notes:" in prompt:
        return f"Robin runs a Slack bot with the app token {PROFILE_SECRET} and likes tea."
    ops = [
        {**new_op(f"User said: {text}"), "message": ref} for ref, text in new_user_messages(request)
    ]
    return json.dumps({"operations": ops})


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(responder=_answer) as stub:
        yield stub


@pytest.fixture
def live(service_factory: Callable[..., LiveService], llm: LLMStub) -> LiveService:
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")


async def _holding(db_conn: psycopg.AsyncConnection, value: str) -> list[str]:
    found = []
    for table, text in TABLES.items():
        cursor = await db_conn.execute(
            f"SELECT count(*) FROM {table} WHERE {text} LIKE %s", (f"%{value}%",)
        )
        row = await cursor.fetchone()
        if row and row[0]:
            found.append(table)
    return found


def _command(live: LiveService, command: str) -> str:
    answer = live.client.post("/v1/commands", json={"chat": CHAT, "command": command})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["text"])


def _turn(live: LiveService, msg_id: str, text: str, history: list[dict[str, str]]) -> None:
    body = {"chat": CHAT, "user_message_id": msg_id, "user_message": text, "history": history}
    assert live.client.post("/v1/turns", json=body).status_code == 202


def _enter_everywhere(live: LiveService) -> None:
    """Every entry point, each with its own format."""
    _turn(live, "t1", FORMATS["turn"][0], [])
    # a password split over two messages of one chat: the label, then the value
    _turn(live, "t2", "my NAS password is", [])
    history = [
        {"role": "user", "content": "my NAS password is"},
        {"role": "assistant", "content": "Go on."},
    ]
    _turn(live, "t3", FORMATS["turn_split"][0], history)
    _command(live, f"/memory add {FORMATS['memory_add'][0]}")
    added = _command(live, "/memory add Robin has a NAS in the cellar")
    _command(live, f"/memory edit {added.split('`')[1]} {FORMATS['memory_edit'][0]}")
    created = live.client.post(
        f"/v1/users/{USER}/memories", json={"content": FORMATS["api_create"][0]}
    )
    assert created.status_code == 201, created.text
    plain = live.client.post(f"/v1/users/{USER}/memories", json={"content": "Robin likes tea"})
    patched = live.client.patch(
        f"/v1/users/{USER}/memories/{plain.json()['id']}", json={"content": FORMATS["api_edit"][0]}
    )
    assert patched.status_code == 200, patched.text
    imported = live.client.post(
        f"/v1/users/{USER}/memories/import",
        json=[{"bank": "personal", "content": FORMATS["json_import"][0], "created_at": AT}],
    )
    assert imported.status_code == 200, imported.text
    owui = live.client.post(
        "/v1/imports/openwebui",
        json={
            "chat": CHAT,
            "memories": [
                {"id": "ow1", "content": FORMATS["openwebui_import"][0], "created_at": 1.7e9}
            ],
        },
    )
    assert owui.status_code == 200, owui.text
    remembered = live.client.post(
        "/v1/memories/remember",
        json={"chat": CHAT, "message_id": "t9", "role": "user", "content": FORMATS["remember"][0]},
    )
    assert remembered.status_code == 200, remembered.text


async def test_every_entry_point_redacts_with_the_one_function(
    live: LiveService, llm: LLMStub, db_conn: psycopg.AsyncConnection
) -> None:
    _enter_everywhere(live)
    live.wait_for_extraction()
    wait_until(
        lambda: any("Notes:" in str(r["messages"][-1]["content"]) for r in llm.requests),
        timeout_s=120,
        what="a profile request",
    )
    live.wait_for_extraction()
    secrets = {door: secret for door, (_, secret) in FORMATS.items() if door != "export"}
    secrets["profile"] = PROFILE_SECRET
    sent = json.dumps(llm.requests, ensure_ascii=False)
    leaks = {door: tables for door, s in secrets.items() if (tables := await _holding(db_conn, s))}
    leaks |= {f"{door} (LLM request)": ["llm"] for door, s in secrets.items() if s in sent}
    assert leaks == {}
    contents = [m["content"] for m in live.client.get(f"/v1/users/{USER}/memories").json()["items"]]
    assert any("P:[redacted password];;" in c for c in contents), contents
    assert any("DB_PASSWORD=[redacted password]" in c for c in contents), contents


async def test_exports_redact_a_row_written_before_the_rules(
    live: LiveService, db_conn: psycopg.AsyncConnection
) -> None:
    created = live.client.post(f"/v1/users/{USER}/memories", json={"content": "Robin has a cat"})
    assert created.status_code == 201
    text, secret = FORMATS["export"]
    # as an older release or a restore of an old dump left it
    await db_conn.execute("UPDATE memories SET content = %s", (text,))
    exported = live.client.get(f"/v1/users/{USER}/memories/export")
    markdown = live.client.get(f"/v1/users/{USER}/memories/export", params={"format": "markdown"})
    command = _command(live, "/memory export")
    assert exported.status_code == 200 and markdown.status_code == 200
    for out in (exported.text, markdown.text, command):
        assert secret not in out
    assert "mailgun [redacted key]" in exported.text


SUMMARY_SECRET = "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"  # Shopify: main missed it


def _summary_with_a_token(request: dict[str, Any]) -> str:
    """A rolling chat summary that repeats a token (an LLM echoing what it read)."""
    if is_chat_summary_request(request):
        summary = f"Robin set up CI; the deploy uses {SUMMARY_SECRET}; Robin drinks tea."
        return json.dumps({"summary": summary})
    return json.dumps({"operations": []})


def _summary_stored(database_url: str) -> bool:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memories WHERE content LIKE %s", ("%deploy uses%",)
        ).fetchone()
    return bool(row and row[0])


async def test_a_chat_summary_is_redacted_before_it_is_stored(
    service_factory: Callable[..., LiveService],
    db_conn: psycopg.AsyncConnection,
    database_url: str,
) -> None:
    with LLMStub(responder=_summary_with_a_token) as stub:
        live = service_factory(
            LLM_BASE_URL=stub.base_url,
            LLM_MODEL="m",
            MEMORY_BATCH_MESSAGES="2",
            MEMORY_CHAT_SUMMARY_TOKENS="1",
        )
        for i in range(4):
            _turn(live, f"s{i}", f"we are setting up the CI runner, step {i}", [])
        live.wait_for_extraction()
        wait_until(lambda: _summary_stored(database_url), timeout_s=120, what="the summary")
    assert await _holding(db_conn, SUMMARY_SECRET) == []
    cursor = await db_conn.execute(
        "SELECT content FROM memories WHERE content LIKE %s", ("%deploy uses%",)
    )
    summaries = [content for (content,) in await cursor.fetchall()]  # every version
    assert summaries and all("the deploy uses [redacted key]" in c for c in summaries)
