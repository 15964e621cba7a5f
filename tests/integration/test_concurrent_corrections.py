"""Two people correct one shared Project Memory at the same moment (issue 27, item 6): both
corrections reach the result.

Each correction is an extraction whose LLM call is held until both are in flight, so both
answers are decided on the same version. Before, the second answer's UPDATE found its target
changed and was dropped with an INFO log line (20 of 20 rounds lost one correction); now the
batch is asked again with the memory as it is, and its correction applies on top.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.embeddings.encoder import Encoder
from service.flows.extraction import RunMode, run_extraction
from service.flows.runtime import Runtime
from testkit.extraction_replies import new_op, new_user_messages
from testkit.llm_stub import LLMStub
from tests.support.llm_gate import LLMGate
from tests.support.races import chat, queue_turn, race_runtime, seed

ROUNDS = int(os.environ.get("CORRECTION_ROUNDS", "100"))
SHOWN = re.compile(r"^\[m1\] \([a-z]+; [0-9-]+\) (.*)$", re.MULTILINE)
ORIGINAL = "Team meeting: room 4A, 10:00"


def _merging_llm(request: dict[str, Any]) -> str:
    """An LLM that corrects the memory it is shown: "room X" or "at HH:MM" in the message
    replaces that part of m1's text, the rest is kept as shown."""
    prompt = str(request["messages"][-1]["content"])
    shown = SHOWN.search(prompt)
    operations = []
    for ref, message in new_user_messages(request):
        if shown is None:
            continue
        text = shown.group(1)
        if room := re.search(r"room (\w+)", message):
            text = re.sub(r"room \w+", f"room {room.group(1)}", text)
        if time := re.search(r"at (\d\d:\d\d)", message):
            text = re.sub(r"\d\d:\d\d", time.group(1), text)
        operations.append({**new_op(text, bank="project", op="UPDATE", ref="m1"), "message": ref})
    return json.dumps({"operations": operations})


@pytest.fixture
def gate() -> LLMGate:
    return LLMGate(_merging_llm)


@pytest.fixture
def llm(gate: LLMGate) -> Iterator[LLMStub]:
    with LLMStub(responder=gate) as stub:
        yield stub
    gate.open()


@pytest.fixture
async def rt(
    database_url: str, encoder: Encoder, tmp_path: Path, llm: LLMStub
) -> AsyncIterator[Runtime]:
    async with race_runtime(
        database_url, encoder, tmp_path / "state", llm_base_url=llm.base_url
    ) as runtime:
        yield runtime


async def _active_project(conn: psycopg.AsyncConnection, folder: str) -> list[str]:
    cursor = await conn.execute(
        "SELECT content FROM memories WHERE owner_id = %s AND status = 'active'", (folder,)
    )
    return [str(c) for (c,) in await cursor.fetchall()]


async def test_two_concurrent_corrections_of_one_project_memory_both_reach_it(
    rt: Runtime, gate: LLMGate, db_conn: psycopg.AsyncConnection
) -> None:
    lost = []
    for n in range(ROUNDS):
        folder = f"project-{n}"
        await seed(rt, user_id="ana", content=ORIGINAL, folder_id=folder)
        ana = await queue_turn(
            rt,
            context=chat("ana", f"ana-{n}", folder_id=folder),
            message="The team meeting moved to room 5B.",
            message_id=f"a{n}",
        )
        ben = await queue_turn(
            rt,
            context=chat("ben", f"ben-{n}", folder_id=folder),
            message="Our team meeting starts at 11:30 now.",
            message_id=f"b{n}",
        )
        gate.close()
        arrived = gate.arrived
        tasks = [
            asyncio.create_task(run_extraction(rt, turn_id=t, mode=RunMode.FLUSH))
            for t in ((ana, ben) if n % 2 else (ben, ana))
        ]
        await gate.wait_arrived(arrived + 2)  # both answers are decided on the same version
        gate.open()
        await asyncio.gather(*tasks)
        if await _active_project(db_conn, folder) != ["Team meeting: room 5B, 11:30"]:
            lost.append((n, await _active_project(db_conn, folder)))
    assert lost == [], f"{len(lost)} of {ROUNDS} rounds lost a correction: {lost[:3]}"
