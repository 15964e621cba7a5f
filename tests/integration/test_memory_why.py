"""`/memory why` right after a reply names the memories that went into it, although the
record of them is written after the answer went out. Real PostgreSQL and embedding model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from service.core.records import ChatContext, ChatKind
from service.embeddings.encoder import Encoder
from service.flows import commands, context
from tests.support.runtimes import RuntimeFactory, runtime_factory

CHAT = ChatContext(user_id="ana", kind=ChatKind.SAVED, chat_id="trip-chat")


@pytest.fixture
async def runtime(
    database_url: str, encoder: Encoder, tmp_path: Path
) -> AsyncIterator[RuntimeFactory]:
    async with runtime_factory(database_url, encoder, tmp_path) as build:
        yield build


async def test_memory_why_right_after_a_reply_lists_the_memories_it_used(
    runtime: RuntimeFactory,
) -> None:
    rt = runtime()
    answers = []
    async with rt.jobs.open_async():
        _, added = await commands.run_command(
            rt, chat=CHAT, command_text="/memory add User lands in Lima on June 3."
        )
        assert added.startswith("Remembered in Personal:")
        for question in ("When do we land in Lima?", "Which day do we reach Lima?"):
            result = await context.build_context(
                rt, chat=CHAT, message=question, budget_tokens=None, now=None
            )
            assert [m.memory.content for m in result.items] == ["User lands in Lima on June 3."]
            # nothing in between: the next thing this user does is ask why
            _, why = await commands.run_command(rt, chat=CHAT, command_text="/memory why")
            answers.append(why)

    assert [a.startswith("**Memories used for this chat's last reply**") for a in answers] == [
        True,
        True,
    ]
    assert ["User lands in Lima on June 3\\." in a for a in answers] == [True, True]
    # each answer is its own reply's record (the two questions' similarities differ)
    assert answers[0] != answers[1]
