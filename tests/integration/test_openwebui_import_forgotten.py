"""`/memory import openwebui` skips the memories the user forgot here (issue 27, item 5):
each forget of a user's own memory keeps a keyed digest of its text (HMAC, no text;
storage/forgotten_texts.py), and `… openwebui forgotten` imports them anyway.

Before, a memory forgotten here came back from Open WebUI's copy on the next import.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from testkit.filter_loader import load_filter
from testkit.live_service import LiveService
from tests.integration.test_commands import PIPE_PATH, Session
from tests.integration.test_import_command import _code, _fake_openwebui_memories, _harness

ROWS = [
    {"id": "m1", "content": "I keep two beehives", "created_at": 1_700_000_000},
    {"id": "m2", "content": "My favourite tea is genmaicha", "created_at": 1_710_000_000},
]


@pytest.fixture
def pipe() -> Any:
    return load_filter(PIPE_PATH).Pipe()


async def test_a_memory_forgotten_here_is_not_imported_from_open_webui_unasked(
    service: LiveService, pipe: Any, db_conn: psycopg.AsyncConnection
) -> None:
    harness = _harness(service)
    _fake_openwebui_memories(harness, ROWS)
    gina = Session(harness, pipe, "gina")
    preview, _ = await gina.type("/memory import openwebui")
    assert preview.startswith("**I would add 2 memories from Open WebUI**"), preview
    first, _ = await gina.type(f"/memory import confirm {_code(preview)}")
    assert first.startswith("**Imported 2 memories**"), first
    stored = service.client.get("/v1/users/gina/memories").json()["items"]
    [bees] = [m for m in stored if m["content"] == "User keeps two beehives"]
    assert service.client.delete(f"/v1/users/gina/memories/{bees['id']}").status_code == 204

    again, _ = await gina.type("/memory import openwebui")
    assert again == (
        "Nothing new to import from Open WebUI (1 you forgot here, skipped (`/memory import "
        "openwebui forgotten` brings them back); 1 already known)."
    )
    assert service.client.get("/v1/users/gina/memories").json()["total"] == 1
    # the digest holds no word of the text
    rows = await (await db_conn.execute("SELECT user_id, digest FROM forgotten_texts")).fetchall()
    assert [u for u, _ in rows] == ["gina"]
    assert not any(w in rows[0][1] for w in ("keep", "bee", "hive"))

    asked, _ = await gina.type("/memory import openwebui forgotten")
    assert asked.startswith("**I would add 1 memory from Open WebUI** (1 already known)"), asked
    confirmed, _ = await gina.type(f"/memory import confirm {_code(asked)}")
    assert confirmed.startswith("**Imported 1 memory**"), confirmed
    assert service.client.get("/v1/users/gina/memories").json()["total"] == 2


async def test_another_users_forgetting_skips_nothing_and_deletion_erases_the_digests(
    service: LiveService, pipe: Any, db_conn: psycopg.AsyncConnection
) -> None:
    harness = _harness(service)
    _fake_openwebui_memories(harness, ROWS)
    added = service.client.post(
        "/v1/users/hal/memories", json={"content": "User keeps two beehives"}
    )
    assert service.client.delete(f"/v1/users/hal/memories/{added.json()['id']}").status_code == 204
    ida = Session(harness, pipe, "ida")
    answer, _ = await ida.type("/memory import openwebui")
    assert answer.startswith("**I would add 2 memories from Open WebUI**:"), answer
    assert service.client.delete("/v1/users/hal/memories").status_code == 200
    row = await (await db_conn.execute("SELECT count(*) FROM forgotten_texts")).fetchone()
    assert row == (0,)
