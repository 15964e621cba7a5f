"""Two people edit one shared Project Memory by hand at the same moment (issue 27, item 6):
both edits reach the result, or the one that cannot is told what the memory reads now.

Each round holds both edits after each has found the memory (`/memory edit` and the REST
PATCH read it, then check the new text) until both are there, so both start from the same
version. Before, the second write replaced the first without a word (100 of 100 rounds lost
one edit, and the REST PATCH likewise); now the second finds the memory changed, applies its
change on top (`core/edit_merge.py`), and when both changed the same words it is refused with
a sentence naming the current text. A PATCH with the `version` the client saw answers 409
when that version is gone.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.core import commands as text
from service.core.records import ChatContext, ChatKind
from service.embeddings.encoder import Encoder
from service.errors import EditConflict
from service.flows import commands
from service.flows import memories as memory_flow
from service.flows.runtime import Runtime
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from tests.support.races import race_runtime, seed

ROUNDS = int(os.environ.get("EDIT_ROUNDS", "100"))
ORIGINAL = "Team meeting: room 4A, 10:00"
ANA = "Team meeting: room 5B, 10:00"
BEN = "Team meeting: room 4A, 11:30"
BOTH = "Team meeting: room 5B, 11:30"


class _BothRead:
    """Holds the first two edits after they have read the memory, until both have: the
    interleaving in which both start from the same version (no clock involved)."""

    def __init__(self) -> None:
        self.armed = False
        self.waiting = 0
        self.both = asyncio.Event()

    def arm(self) -> None:
        """Hold the next two checks (the seeding write before it passes)."""
        self.armed = True
        self.waiting = 0
        self.both = asyncio.Event()

    async def hold(self) -> None:
        if not self.armed or self.both.is_set():
            return  # not armed, or a later check of the same round (a merge) passes
        self.waiting += 1
        if self.waiting >= 2:
            self.both.set()
        await self.both.wait()


@pytest.fixture
def both_read(monkeypatch: pytest.MonkeyPatch) -> _BothRead:
    gate = _BothRead()
    checked = memory_flow._checked

    async def held(rt: Runtime, content: str) -> str:
        result = await checked(rt, content)
        await gate.hold()
        return result

    monkeypatch.setattr(memory_flow, "_checked", held)
    return gate


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(responder=lambda _: '{"operations": []}') as stub:
        yield stub


@pytest.fixture
async def rt(
    database_url: str, encoder: Encoder, tmp_path: Path, llm: LLMStub
) -> AsyncIterator[Runtime]:
    async with race_runtime(
        database_url, encoder, tmp_path / "state", llm_base_url=llm.base_url
    ) as runtime:
        yield runtime


def _member(user_id: str, folder: str) -> ChatContext:
    """`user_id`'s chat in the shared folder `folder`."""
    return ChatContext(
        user_id=user_id,
        kind=ChatKind.SAVED,
        chat_id=f"{user_id}-{folder}",
        folder_id=folder,
        collaborative=True,
        collaborative_reason="folder_shared",
    )


async def _active(conn: psycopg.AsyncConnection, folder: str) -> list[str]:
    cursor = await conn.execute(
        "SELECT content FROM memories WHERE owner_id = %s AND status = 'active'", (folder,)
    )
    return [str(c) for (c,) in await cursor.fetchall()]


async def _by_command(rt: Runtime, user: str, folder: str, short: str, new: str) -> str:
    _, answer = await commands.run_command(
        rt, chat=_member(user, folder), command_text=f"/memory edit {short} {new}"
    )
    return answer


async def _by_rest(rt: Runtime, user: str, folder: str, memory_id: Any, new: str) -> str:
    try:
        memory = await memory_flow.edit_for_user(
            rt,
            user_id=user,
            memory_id=memory_id,
            content=new,
            bank=None,
            tags=None,
            folder_id=folder,
        )
    except EditConflict as exc:
        return str(exc)
    return memory.content


async def test_two_concurrent_edits_of_one_project_memory_both_reach_it(
    rt: Runtime, both_read: _BothRead, db_conn: psycopg.AsyncConnection
) -> None:
    lost = []
    for n in range(ROUNDS):
        folder = f"project-{n}"
        memory = await seed(rt, user_id="ana", content=ORIGINAL, folder_id=folder)
        both_read.arm()
        if n % 2:  # `/memory edit` in each member's chat
            short = text.short_id(memory)
            edits = [
                _by_command(rt, "ana", folder, short, ANA),
                _by_command(rt, "ben", folder, short, BEN),
            ]
        else:  # PATCH /v1/users/{id}/memories/{id}?folder_id=…
            edits = [
                _by_rest(rt, "ben", folder, memory.id, BEN),
                _by_rest(rt, "ana", folder, memory.id, ANA),
            ]
        answers = await asyncio.gather(*edits)
        if await _active(db_conn, folder) != [BOTH]:
            lost.append((n, answers, await _active(db_conn, folder)))
    assert lost == [], f"{len(lost)} of {ROUNDS} rounds lost an edit: {lost[:3]}"


async def test_edits_of_the_same_words_tell_the_second_editor_what_it_reads_now(
    rt: Runtime, both_read: _BothRead, db_conn: psycopg.AsyncConnection
) -> None:
    memory = await seed(rt, user_id="ana", content=ORIGINAL, folder_id="f")
    short = text.short_id(memory)
    both_read.arm()
    answers = await asyncio.gather(
        _by_command(rt, "ana", "f", short, "Team meeting: room 5B, 10:00"),
        _by_command(rt, "ben", "f", short, "Team meeting: room 6C, 10:00"),
    )
    (stored,) = await _active(db_conn, "f")
    changed = [a for a in answers if a.startswith("Changed")]
    told = [a for a in answers if "was not applied" in a]
    assert len(changed) == 1 and len(told) == 1, answers
    assert stored in changed[0] and f"it now reads “{stored}”" in told[0]


def test_a_patch_with_the_version_the_user_saw_is_refused_once_it_changed(
    service: LiveService,
) -> None:
    client = service.client
    made = client.post(
        "/v1/users/u1/memories", json={"content": "User keeps bees", "tags": ["possession"]}
    ).json()
    assert made["version"] == 1
    first = client.patch(
        f"/v1/users/u1/memories/{made['id']}", json={"content": "User keeps wasps", "version": 1}
    )
    assert first.status_code == 200 and first.json()["version"] == 2, first.text
    stale = client.patch(
        f"/v1/users/u1/memories/{made['id']}", json={"content": "User keeps ants", "version": 1}
    )
    assert stale.status_code == 409, stale.text
    assert "it now reads “User keeps wasps” (version 2)" in stale.json()["detail"]
    assert client.get(f"/v1/users/u1/memories/{made['id']}").json()["content"] == (
        "User keeps wasps"
    )
    # the bank and tags alone need no version
    moved = client.patch(f"/v1/users/u1/memories/{made['id']}", json={"tags": ["identity"]})
    assert moved.status_code == 200, moved.text
