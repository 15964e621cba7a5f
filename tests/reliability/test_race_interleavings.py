"""Randomized races: an extraction held in its LLM call against forget, forget all, an edit,
a chat deletion and another extraction, at a random moment, with a random answer.

Every round uses its own users, so one database holds the whole run; each pair gets
`RELIABILITY_RACE_ROUNDS` rounds (100 under `make reliability`: 500 interleavings), seeded,
and the run stops early after `RELIABILITY_RACE_TIME_S`. The figures (resurrected memories,
double successors, stuck turns, writes for discarded turns, lost edits, versions left active
after a forget, operations that waited for the LLM — all must be 0) go to
`$RELIABILITY_RESULTS/extraction_races.json`.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.embeddings.encoder import Encoder
from service.errors import MemoryNotFound
from service.flows import memories as memory_flow
from service.flows.extraction import RunMode, run_extraction
from service.flows.runtime import Runtime
from testkit.extraction_replies import new_op, new_user_messages
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until_async as wait_until
from tests.reliability.support import env_int, record_figures
from tests.support.llm_gate import LLMGate
from tests.support.races import chat, forget_all, integrity, queue_turn, race_runtime, seed

PAIRS = ("forget", "forget_all", "edit", "chat_deletion", "extraction")
MOMENTS = ("before_the_call", "during_the_call", "with_the_write", "after_the_answer")
ANSWERS = ("update", "delete", "restate", "new")
SEED = 1313


class _Answers:
    """The stand-in LLM's answers, chosen per round: `[token]` in the message picks them."""

    def __init__(self) -> None:
        self.rules: dict[str, list[dict[str, Any]]] = {}

    def __call__(self, request: dict[str, Any]) -> str:
        import json

        ops: list[dict[str, Any]] = []
        for ref, message in new_user_messages(request):
            for token, rule in self.rules.items():
                if token in message:
                    ops += [{**op, "message": ref} for op in rule]
        return json.dumps({"operations": ops})


@pytest.fixture
def answers() -> _Answers:
    return _Answers()


@pytest.fixture
def gate(answers: _Answers) -> Iterator[LLMGate]:
    held = LLMGate(answers)
    yield held
    held.open()


@pytest.fixture
async def rt(
    database_url: str, encoder: Encoder, tmp_path: Path, gate: LLMGate
) -> AsyncIterator[Runtime]:
    with LLMStub(responder=gate) as stub:
        async with race_runtime(
            database_url, encoder, tmp_path / "state", llm_base_url=stub.base_url
        ) as runtime:
            yield runtime
        gate.open()


async def _run_round(
    rt: Runtime,
    gate: LLMGate,
    answers: _Answers,
    conn: psycopg.AsyncConnection,
    rng: random.Random,
    *,
    pair: str,
    n: int,
    figures: Counter[str],
) -> str:
    """One interleaving; returns the text it forgot ("" when it forgot none)."""
    token = f"[{pair}#{n}]"
    user, other, folder = f"{pair}-{n}", f"{pair}-{n}-b", f"f-{pair}-{n}"
    shared = pair == "extraction"
    old = f"Fact {token} is as it was"
    target = await seed(rt, user_id=user, content=old, folder_id=folder if shared else None)
    kind = rng.choice(ANSWERS)
    moment = rng.choice(MOMENTS)
    figures[f"moment:{moment}"] += 1
    figures[f"answer:{kind}"] += 1
    answers.rules[token] = _answer_ops(kind, shared=shared, token=token, user=user, old=old)
    context = chat(user, f"chat-{pair}-{n}", folder_id=folder if shared else None)
    turn = await queue_turn(rt, context=context, message=f"News {token}", message_id="t1")

    async def racing() -> None:
        await _race(
            rt,
            pair,
            token=token,
            user=user,
            target=target.id,
            chat_id=context.chat_id,
            second_chat=(other, f"chat-{pair}-{n}-b", folder),
            figures=figures,
        )

    async def extraction() -> Any:
        return await run_extraction(rt, turn_id=turn, mode=RunMode.FLUSH)

    await _interleave(gate, moment, extraction, racing, shared=shared, figures=figures)
    forgotten = old if pair in ("forget", "forget_all") else ""
    if forgotten and moment == "before_the_call" and kind == "restate":
        # the LLM was never shown the forgotten memory: a turn queued before the forget says
        # it again, and the guard the forget left the turn drops it (checked like the rest)
        figures["restated_by_a_turn_queued_before_the_forget"] += 1
    await _check_round(conn, figures, pair=pair, token=token, user=user, moment=moment)
    return forgotten


def _answer_ops(
    kind: str, *, shared: bool, token: str, user: str, old: str
) -> list[dict[str, Any]]:
    """The stand-in LLM's operations for the round's answer kind (shared rounds update)."""
    bank = "project" if shared else "personal"
    if shared or kind == "update":
        return [new_op(f"Fact {token} changed by {user}", op="UPDATE", ref="m1", bank=bank)]
    if kind == "delete":
        return [new_op("", op="DELETE", ref="m1", bank=bank)]
    if kind == "restate":
        return [new_op(old + ".", bank=bank)]
    return [new_op(f"Unrelated fact {token} about {user}", bank=bank)]


async def _race(
    rt: Runtime,
    pair: str,
    *,
    token: str,
    user: str,
    target: uuid.UUID,
    chat_id: str,
    second_chat: tuple[str, str, str],
    figures: Counter[str],
) -> None:
    """The operation `pair` races against the extraction; `second_chat` is (user, chat id,
    folder) of the other extraction's turn."""
    if pair == "forget":
        try:
            await memory_flow.forget_for_user(rt, user_id=user, memory_id=target, folder_id=None)
        except MemoryNotFound:
            pass  # superseded meanwhile and forgotten by no one: nothing to do
    elif pair == "forget_all":
        await forget_all(rt, user_id=user)
    elif pair == "edit":
        try:
            await memory_flow.edit_for_user(
                rt,
                user_id=user,
                memory_id=target,
                content=f"Edited {token}",
                bank=None,
                tags=None,
            )
            figures["edits_applied"] += 1
        except MemoryNotFound:
            pass  # the extraction's UPDATE or DELETE came first
    elif pair == "chat_deletion":
        await memory_flow.forget_chat(rt, chat_ids=[chat_id], actor="openwebui")
    else:
        other, other_chat, folder = second_chat
        second = await queue_turn(
            rt,
            context=chat(other, other_chat, folder_id=folder),
            message=f"Other news {token}",
            message_id="t2",
        )
        await run_extraction(rt, turn_id=second, mode=RunMode.FLUSH)


async def _interleave(
    gate: LLMGate,
    moment: str,
    extraction: Callable[[], Coroutine[Any, Any, Any]],
    racing: Callable[[], Coroutine[Any, Any, None]],
    *,
    shared: bool,
    figures: Counter[str],
) -> None:
    """Run the extraction and the racing operation in the order `moment` names."""
    if moment == "before_the_call":
        await racing()
        await extraction()
        return
    if moment == "after_the_answer":
        await extraction()
        await racing()
        return
    gate.close()
    arrived = gate.arrived
    task = asyncio.create_task(extraction())
    await gate.wait_arrived(arrived + 1)
    if moment == "during_the_call":
        if shared:
            # the second extraction is held too; the two answers go in a random order
            other_task = asyncio.create_task(racing())
            await gate.wait_arrived(arrived + 2)
            gate.open()  # the one that finds m1 replaced asks again
            await asyncio.gather(task, other_task)
        else:
            await _must_not_wait(racing, task, figures)
            gate.release()
            await task
    else:  # with_the_write: the answer and the racing operation at the same moment
        gate.open()
        await asyncio.gather(task, racing())
    gate.open()


async def _must_not_wait(
    racing: Callable[[], Awaitable[None]], held: asyncio.Task[Any], figures: Counter[str]
) -> None:
    """Run `racing` while `held` waits for the LLM; count it when it had to wait."""
    task = asyncio.ensure_future(racing())
    await wait_until(lambda: task.done() or held.done(), timeout_s=60, what="the operation")
    if held.done():
        figures["waited_for_the_llm"] += 1
    await task


async def _check_round(
    conn: psycopg.AsyncConnection,
    figures: Counter[str],
    *,
    pair: str,
    token: str,
    user: str,
    moment: str,
) -> None:
    """Figures only the round knows: writes for discarded turns, lost edits."""
    row = await (
        await conn.execute(
            "SELECT count(*) FROM turns t JOIN memories m ON m.source_message_id = "
            "t.user_message_id AND m.source_chat_id = t.chat_id "
            "WHERE t.status = 'discarded' AND t.user_id = %s AND m.content <> ''",
            [user],
        )
    ).fetchone()
    figures["writes_for_discarded_turns"] += int(row[0]) if row else 0
    if pair == "forget":
        # forgetting the id the user had (maybe superseded by the answer since) forgets
        # every version of the fact: no successor stays active
        left = await (
            await conn.execute(
                "SELECT count(*) FROM memories WHERE owner_id = %s AND status = 'active' "
                "AND content LIKE %s",
                [user, f"Fact {token} changed by %"],
            )
        ).fetchone()
        figures["versions_left_after_forget"] += int(left[0]) if left else 0
    if pair == "edit" and moment in ("during_the_call", "with_the_write"):
        edited = await (
            await conn.execute(
                "SELECT status FROM memories WHERE content = %s", [f"Edited {token}"]
            )
        ).fetchall()
        # an edit made while the answer was decided is never overwritten by that answer
        # (before the call the LLM sees the edited version and may rightly change it)
        figures["lost_edits"] += sum(1 for (status,) in edited if status != "active")


async def test_random_interleavings_never_resurrect_double_or_strand(
    rt: Runtime, gate: LLMGate, answers: _Answers, db_conn: psycopg.AsyncConnection
) -> None:
    rounds = env_int("RELIABILITY_RACE_ROUNDS", 6)
    budget_s = env_int("RELIABILITY_RACE_TIME_S", 240)
    rng = random.Random(SEED)
    figures: Counter[str] = Counter()
    forgotten: list[str] = []
    started = time.monotonic()
    done: Counter[str] = Counter()
    for n in range(rounds):
        for pair in PAIRS:
            if time.monotonic() - started > budget_s:
                break
            text = await _run_round(
                rt, gate, answers, db_conn, rng, pair=pair, n=n, figures=figures
            )
            if text:
                forgotten.append(text)
            done[pair] += 1
    found = await integrity(db_conn, forgotten_texts=forgotten)
    result = {
        "seed": SEED,
        "interleavings_per_pair": dict(done),
        "interleavings": sum(done.values()),
        "duration_s": round(time.monotonic() - started, 1),
        **found.as_dict(),
        "writes_for_discarded_turns": figures["writes_for_discarded_turns"],
        "lost_edits": figures["lost_edits"],
        "versions_left_after_forget": figures["versions_left_after_forget"],
        "waited_for_the_llm": figures["waited_for_the_llm"],
        "moments": {m: figures[f"moment:{m}"] for m in MOMENTS},
        "answers": {a: figures[f"answer:{a}"] for a in ANSWERS},
        "edits_applied": figures["edits_applied"],
        "restated_by_a_turn_queued_before_the_forget": figures[
            "restated_by_a_turn_queued_before_the_forget"
        ],
    }
    record_figures("extraction_races", result)
    assert min(done.values()) >= min(rounds, 3), f"too few rounds ran in {budget_s} s: {done}"
    assert {
        k: result[k]
        for k in (
            "resurrected",
            "double_successors",
            "stuck_turns",
            "writes_for_discarded_turns",
            "lost_edits",
            "versions_left_after_forget",
            "waited_for_the_llm",
        )
    } == {
        "resurrected": 0,
        "double_successors": 0,
        "stuck_turns": 0,
        "writes_for_discarded_turns": 0,
        "lost_edits": 0,
        "versions_left_after_forget": 0,
        "waited_for_the_llm": 0,
    }
