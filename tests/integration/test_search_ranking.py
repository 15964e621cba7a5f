"""`/memory search` ranks with the read path's ranking (issue 29 item 8): one rule for which
memories match a query and in which order, `flows.context.retrieve` over core/ranking.py,
not a fusion of its own. Real PostgreSQL and embedding model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from service.core import privacy
from service.core.records import ChatContext, ChatKind, RankedMemory
from service.embeddings.encoder import Encoder
from service.flows import commands, context
from tests.support.runtimes import RuntimeFactory, runtime_factory

CHAT = ChatContext(user_id="rosa", kind=ChatKind.SAVED, chat_id="search-chat")
FACTS = (
    "User rides a red bike to work",
    "User's bike has a broken bell",
    "User keeps two cats named Miso and Tofu",
    "User is learning the cello",
    "User bought a new helmet for cycling",
)


@pytest.fixture
async def runtime(
    database_url: str, encoder: Encoder, tmp_path: Path
) -> AsyncIterator[RuntimeFactory]:
    async with runtime_factory(database_url, encoder, tmp_path) as build:
        yield build


async def test_memory_search_lists_what_the_read_path_ranks_in_its_order(
    runtime: RuntimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = runtime()
    async with rt.jobs.open_async():  # an add asks for the profile to be rewritten
        for fact in FACTS:
            _, added = await commands.run_command(rt, chat=CHAT, command_text=f"/memory add {fact}")
            assert added.startswith("Remembered in Personal:"), added
    calls: list[dict[str, Any]] = []
    real = context.retrieve

    async def recorded(*args: Any, **kwargs: Any) -> list[RankedMemory]:
        calls.append(kwargs)
        return await real(*args, **kwargs)

    monkeypatch.setattr(context, "retrieve", recorded)
    _, answer = await commands.run_command(rt, chat=CHAT, command_text="/memory search bike")
    assert [c["query"] for c in calls] == ["bike"]
    assert calls[0]["apply_gate"] is True
    ranked = await real(
        rt,
        scope=privacy.read_scope(CHAT),
        query="bike",
        now=datetime.now(UTC),
        limit=commands.SEARCH_LIMIT,
        apply_gate=True,
    )
    assert ranked, "the read path finds the bike memories"
    listed = [line.split(" · ", 1)[1] for line in answer.splitlines() if line.startswith("- `")]
    assert [line.split(" · ", 1)[1] for line in listed] == [r.memory.content for r in ranked]
    assert listed[0].endswith("bike to work") or listed[0].endswith("broken bell")
