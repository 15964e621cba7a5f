"""The daily summarizer over the real database, embedding model and LLM stand-in (case 19,
and what it adds to cases 11, 13, 15 and 16)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from service.cli.main import app as cli
from service.core.consolidation import owner_scope
from service.core.records import OwnerKind
from service.embeddings.encoder import Encoder
from service.flows import consolidation
from service.flows.consolidation import Outcome, Owner
from service.flows.runtime import Runtime
from service.jobs.app import build_job_app
from service.storage import consolidation as store
from testkit.extraction_replies import new_op, new_user_message
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.summary_replies import faithful_merge, is_summary_request, with_summaries
from testkit.waiting import wait_until_async
from tests.support.runtimes import RuntimeFactory, runtime_factory

U1 = Owner(OwnerKind.USER, "u1")
F1 = Owner(OwnerKind.FOLDER, "f1")
CHAT = {"user_id": "u1", "user_name": "Noor", "chat_id": "chat-1", "kind": "saved"}

#: Case 19: 3 dog facts, 2 near-duplicates about coffee, 7 unrelated facts in three banks.
SEED: list[dict[str, Any]] = [
    {"content": "User's dog is named Biscuit", "tags": ["possession"]},
    {"content": "Biscuit is a border collie", "tags": ["possession"]},
    {"content": "Biscuit's vet is Dr. Alvarez at the Riverside clinic", "tags": ["possession"]},
    {"content": "User drinks an oat-milk flat white every morning", "tags": ["preference"]},
    {"content": "Every morning the user has a flat white with oat milk", "tags": ["preference"]},
    {"content": "User lives in Valencia", "tags": ["identity"]},
    {"content": "User's sister Noor is a marine biologist", "tags": ["relationship"]},
    {"content": "User is vegetarian", "tags": ["preference"]},
    {
        "content": "Prefers concise bullet-point answers",
        "tags": ["preference"],
        "bank": "interaction_patterns",
    },
    {
        "content": "Wants code examples in Python",
        "tags": ["preference"],
        "bank": "interaction_patterns",
    },
    {"content": "Project uses React and TypeScript", "bank": "project", "folder_id": "f1"},
    {"content": "Project deploys to Kubernetes every Friday", "bank": "project", "folder_id": "f1"},
]

#: One question per distinct fact (11: the coffee pair is one fact) and the words answering it.
QUESTIONS: list[tuple[str, str, str | None]] = [
    ("What is my dog called?", "Biscuit", None),
    ("What breed is my dog?", "border collie", None),
    ("Who is my dog's vet?", "Alvarez", None),
    ("How do I take my morning coffee?", "flat white", None),
    ("Which city do I live in?", "Valencia", None),
    ("What does my sister do for work?", "marine biologist", None),
    ("Do I have any dietary restrictions?", "vegetarian", None),
    ("How should you format your answers for me?", "bullet-point", None),
    ("Which language should code examples use?", "Python", None),
    ("What is the project's tech stack?", "React and TypeScript", "f1"),
    ("When does the project deploy?", "Kubernetes every Friday", "f1"),
]


# --- fixtures and helpers -----------------------------------------------------------------


def answers(rules: dict[str, Any]) -> Callable[[dict[str, Any]], str]:
    """The stand-in's answers: summaries merged faithfully, extraction by `rules` (message
    needle → operations, or a function of the request returning them), anything else (the
    core-profile requests) an empty answer, which writes no profile."""

    def extract(request: dict[str, Any]) -> str:
        message = new_user_message(request)
        if not message:
            return ""
        for needle, ops in rules.items():
            if needle in message:
                found = ops(request) if callable(ops) else ops
                return json.dumps({"operations": found}, ensure_ascii=False)
        return json.dumps({"operations": []})

    return with_summaries(extract)


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(answers({})) as stub:
        yield stub


@pytest.fixture
def live(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")


@pytest.fixture
async def runtime(
    database_url: str, encoder: Encoder, llm: LLMStub, tmp_path: Path
) -> AsyncIterator[RuntimeFactory]:
    """Build Runtimes for calling the summarizer's flows in-process: `runtime(**env)`."""
    async with runtime_factory(
        database_url, encoder, tmp_path, LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model"
    ) as build:
        yield build


def seed(live: LiveService, items: list[dict[str, Any]] = SEED) -> list[dict[str, Any]]:
    created = []
    for item in items:
        answer = live.client.post("/v1/users/u1/memories", json=item)
        assert answer.status_code == 201, answer.text
        created.append(answer.json())
    return created


async def age(db_conn: psycopg.AsyncConnection, days: int = 30) -> None:
    """Move every memory back in time, past the age gate."""
    await db_conn.execute(
        "UPDATE memories SET created_at = created_at - make_interval(days => %s), "
        "updated_at = updated_at - make_interval(days => %s)",
        (days, days),
    )


async def snapshot(db_conn: psycopg.AsyncConnection) -> list[tuple[Any, ...]]:
    rows = await (
        await db_conn.execute(
            "SELECT id, status, bank, content, tags, superseded_by, summary_of, updated_at "
            "FROM memories ORDER BY seq"
        )
    ).fetchall()
    return list(rows)


async def count(db_conn: psycopg.AsyncConnection, sql: str, *args: Any) -> int:
    row = await (await db_conn.execute(sql, args or None)).fetchone()
    assert row is not None
    return int(row[0])


EVENTS = "SELECT count(*) FROM memory_events WHERE actor = 'summarizer'"


def summary_requests(llm: LLMStub) -> list[dict[str, Any]]:
    """The requests the summarizer sent (the service also asks for core profiles)."""
    return [r for r in llm.requests if is_summary_request(r)]


def active_texts(live: LiveService) -> list[str]:
    mine = live.client.get("/v1/users/u1/memories", params={"folder_id": "f1"}).json()
    return [m["content"] for m in mine["items"]]


def context_block(live: LiveService, question: str, folder: str | None) -> str:
    chat = {**CHAT, "chat_id": f"q-{uuid.uuid4()}", "folder_id": folder}
    answer = live.client.post("/v1/context", json={"chat": chat, "message": question})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["block"])


def answerable(live: LiveService) -> dict[str, tuple[bool, bool]]:
    """Per question: (its answer is injected by POST /v1/context, it is in an active memory)."""
    texts = " | ".join(active_texts(live))
    return {
        q: (needle in context_block(live, q, folder), needle in texts)
        for q, needle, folder in QUESTIONS
    }


# --- case 19 ------------------------------------------------------------------------------


LOOSE = {"MEMORY_CONSOLIDATION_COSINE": "0.5"}
"""A looser threshold than the default, under which the three dog facts form a cluster."""


async def _three_runs(
    live: LiveService,
    rt: Runtime,
    db_conn: psycopg.AsyncConnection,
    llm: LLMStub,
    *,
    merged: list[range],
) -> None:
    """Case 19 with the seed above: run the summarizer 3 times and check what must hold.

    Args:
        merged: the groups of SEED indexes expected to become one summary each.
    """
    seeded = seed(live)
    await age(db_conn)
    before = answerable(live)
    assert all(in_memory for _, in_memory in before.values())

    first = await consolidation.summarize(rt)
    retired = sum(len(group) for group in merged)
    assert [(str(r.owner), r.outcome, len(r.summaries), r.merged) for r in first.results] == [
        ("folder:f1", Outcome.NOTHING, 0, 0),
        ("user:u1", Outcome.APPLIED, len(merged), retired),
    ]
    summaries = list(first.results[1].summaries)
    assert len(summary_requests(llm)) == len(merged)

    # each summary keeps every source's text, its bank and its tags (here: faithful merges)
    ids = {m["content"]: uuid.UUID(m["id"]) for m in seeded}
    rows = {r[0]: r for r in await snapshot(db_conn)}
    for group in merged:
        sources = [SEED[i] for i in group]
        summary = next(x for x in summaries if x.content.startswith(sources[0]["content"]))
        assert summary.content == "; ".join(s["content"] for s in sources)
        assert (summary.bank.value, summary.tags, summary.source_kind.value) == (
            "personal",
            tuple(sources[0]["tags"]),
            "summary",
        )
        # every retired row points at its successor, the summary lists its sources
        source_ids = [ids[s["content"]] for s in sources]
        assert rows[summary.id][6] == source_ids
        for source_id in source_ids:
            assert rows[source_id][1] == "archived" and rows[source_id][5] == summary.id
        async with rt.db.unit_of_work() as session:
            listed = await store.summary_sources(
                session, scope=owner_scope(U1.kind, U1.id), summary_id=summary.id
            )
            foreign = await store.summary_sources(
                session, scope=owner_scope(OwnerKind.USER, "u2"), summary_id=summary.id
            )
        assert ([m.id for m in listed], foreign) == (source_ids, [])
    kept = [i for i in range(len(SEED)) if not any(i in group for group in merged)]
    assert [(rows[ids[SEED[i]["content"]]][1], rows[ids[SEED[i]["content"]]][2]) for i in kept] == [
        ("active", SEED[i].get("bank", "personal")) for i in kept
    ]
    assert await count(db_conn, "SELECT count(*) FROM memories WHERE status = 'active'") == (
        len(SEED) - retired + len(merged)
    )
    actions = await (
        await db_conn.execute(
            "SELECT action, count(*) FROM memory_events WHERE actor = 'summarizer' "
            "GROUP BY action ORDER BY action"
        )
    ).fetchall()
    assert actions == [("archive", retired), ("create", len(merged))]

    # every distinct fact is still answerable, and nothing injected before is lost
    after = answerable(live)
    assert all(in_memory for _, in_memory in after.values()), after
    lost = [q for q, (injected, _) in before.items() if injected and not after[q][0]]
    assert lost == []

    # runs 2 and 3 find nothing to do
    state = await snapshot(db_conn)
    events = await count(db_conn, EVENTS)
    for _ in range(2):
        again = await consolidation.summarize(rt)
        assert [r.outcome for r in again.results] == [Outcome.NOTHING, Outcome.NOTHING]
        assert await snapshot(db_conn) == state
        assert await count(db_conn, EVENTS) == events
    assert len(summary_requests(llm)) == len(merged)
    assert await count(db_conn, "SELECT count(*) FROM consolidation_runs") == 1


async def test_three_default_runs_merge_the_duplicate_pair_and_nothing_else(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
    llm: LLMStub,
) -> None:
    """Case 19 as written: the duplicate pair is merged, the dog's name, breed and vet stay
    three memories (11 active of 12), and runs 2 and 3 change nothing."""
    await _three_runs(live, runtime(), db_conn, llm, merged=[range(3, 5)])


async def test_three_looser_runs_also_summarize_the_dog_facts_without_losing_one(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
    llm: LLMStub,
) -> None:
    """Case 19 with a looser threshold: the dog facts become one summary that keeps bank,
    tags and every fact; the sources are archived with links; runs 2 and 3 change nothing."""
    await _three_runs(live, runtime(**LOOSE), db_conn, llm, merged=[range(0, 3), range(3, 5)])


async def test_the_guard_refuses_a_run_that_would_retire_too_much(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
    llm: LLMStub,
) -> None:
    seed(live)
    await age(db_conn)
    state = await snapshot(db_conn)
    rt = runtime(MEMORY_CONSOLIDATION_GUARD="0.25", **LOOSE)
    report = await consolidation.summarize(rt, owners=[U1])
    assert [(r.outcome, r.detail) for r in report.results] == [
        (
            Outcome.REFUSED,
            "the run would lower the active memories from 10 to 7 (-30%); the "
            "guard allows at most -25%",
        )
    ]
    assert await snapshot(db_conn) == state
    assert summary_requests(llm) == []
    runs = await (
        await db_conn.execute(
            "SELECT owner_id, outcome, active_before, active_after, merged FROM consolidation_runs"
        )
    ).fetchall()
    assert runs == [("u1", "refused", 10, 10, 0)]


# --- what the summarizer adds to cases 11, 13, 15 and 16 ----------------------------------


def _update_of(needle: str, content: str, **kw: Any) -> Callable[[dict[str, Any]], list[Any]]:
    """An UPDATE of the shown memory whose text contains `needle`."""

    def ops(request: dict[str, Any]) -> list[Any]:
        prompt = str(request["messages"][-1]["content"])
        for line in prompt.split("EXISTING MEMORIES:\n", 1)[1].splitlines():
            if needle in line:
                ref = line[1 : line.index("]")]
                return [new_op(content, op="UPDATE", ref=ref, **kw)]
        return [new_op(content, **kw)]

    return ops


def _say(live: LiveService, messages: list[str], *, first: int = 0) -> None:
    """Hand over one turn per message, each in its own chat, and wait for extraction."""
    for i, message in enumerate(messages, start=first):
        chat = {**CHAT, "chat_id": f"s{i}"}
        answer = live.client.post(
            "/v1/turns",
            json={
                "chat": chat,
                "user_message_id": f"m{i}",
                "user_message": message,
                "assistant_message": "Noted.",
            },
        )
        assert answer.json()["status"] == "queued"
        live.wait_for_extraction()


async def test_superseded_history_is_never_clustered_back_to_life(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
    llm: LLMStub,
) -> None:
    """Cases 13, 15, 16: the old versions stay history; only current facts are merged."""
    llm.responder = answers(
        {
            "love spicy": [new_op("User loves spicy food", tags=["preference"])],
            "can't handle spicy": _update_of(
                "spicy", "User no longer tolerates spicy food", tags=["preference"]
            ),
            "live in Tallinn": [new_op("User lives in Tallinn", tags=["identity"])],
            "moved from Tallinn": _update_of(
                "Tallinn", "User moved from Tallinn to Valencia in April 2026", tags=["identity"]
            ),
            "pharmacist": [new_op("User works as a pharmacist", tags=["identity"])],
            "paramedic": _update_of("pharmacist", "User works as a paramedic", tags=["identity"]),
            "Thai": [new_op("User likes mild Thai curries", tags=["preference"])],
            "ramen": [new_op("User avoids chili in ramen", tags=["preference"])],
            "peppers": [new_op("User removes hot peppers from dishes", tags=["preference"])],
        }
    )
    _say(
        live,
        [
            "I love spicy food.",
            "I work as a pharmacist.",
            "I live in Tallinn.",
            "These days I can't handle spicy food at all.",
            "I moved from Tallinn to Valencia last month.",
            "I left pharmacy; I'm a paramedic now.",
            "I like mild Thai curries.",
            "No chili in my ramen please.",
            "I take the hot peppers out of dishes.",
        ],
    )
    superseded = await (
        await db_conn.execute(
            "SELECT id, content, superseded_by FROM memories WHERE status = 'superseded' "
            "ORDER BY seq"
        )
    ).fetchall()
    assert [r[1] for r in superseded] == [
        "User loves spicy food",
        "User works as a pharmacist",
        "User lives in Tallinn",
    ]
    await age(db_conn)
    rt = runtime(**LOOSE)
    for _ in range(2):
        await consolidation.summarize(rt)
    still = await (
        await db_conn.execute(
            "SELECT id, content, superseded_by FROM memories WHERE status = 'superseded' "
            "ORDER BY seq"
        )
    ).fetchall()
    assert still == superseded
    texts = " | ".join(active_texts(live))
    for old in ("loves spicy", "lives in Tallinn", "as a pharmacist"):
        assert old not in texts
    for current in ("no longer tolerates spicy food", "to Valencia", "as a paramedic"):
        assert current in texts
    summaries = [
        r[0]
        for r in await (
            await db_conn.execute("SELECT content FROM memories WHERE source_kind = 'summary'")
        ).fetchall()
    ]
    assert len(summaries) == 1 and summaries[0].startswith("User no longer tolerates spicy food; ")
    assert "loves spicy" not in summaries[0]
    block = context_block(live, "Where do I live now?", None)
    assert "Valencia" in block and "lives in Tallinn" not in block


async def test_duplicates_that_extraction_let_through_end_as_one_memory(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
    llm: LLMStub,
) -> None:
    """Case 11: "I like cats" stored twice in different words ends as one active memory."""
    llm.responder = answers(
        {
            "I like cats.": [new_op("User likes cats.", tags=["preference"])],
            # cosine 0.89: no rewording for extraction (core/dedup), a duplicate for the summarizer
            "really like": [new_op("User is really fond of cats", tags=["preference"])],
            "beehives": [new_op("User keeps two beehives", tags=["possession"])],
        }
    )
    _say(live, ["I like cats.", "I really like cats.", "I keep two beehives."])
    # extraction itself now merges the paraphrase into the fact it restates (core/reconcile)
    assert sorted(active_texts(live)) == ["User keeps two beehives", "User likes cats."]
    # one that reaches storage anyway (typed through the API, which reconcile does not see)
    added = live.client.post(
        "/v1/users/u1/memories", json={"content": "User is really fond of cats"}
    )
    assert added.status_code == 201, added.text
    assert sorted(active_texts(live)) == [
        "User is really fond of cats",
        "User keeps two beehives",
        "User likes cats.",
    ]
    await age(db_conn)
    report = await consolidation.summarize(runtime())
    assert report.results[0].plan.clusters[0].duplicates is True
    cats = [t for t in active_texts(live) if "cat" in t]
    assert cats == ["User likes cats.; User is really fond of cats"]


# --- failures, races, dry runs and restore ------------------------------------------------


async def test_an_invalid_summary_leaves_its_cluster_as_it_was(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
    llm: LLMStub,
) -> None:
    def lossy(request: dict[str, Any]) -> str:
        answer = json.loads(faithful_merge(request))
        if "Biscuit" in answer["content"]:  # drops the vet: refused, repaired, refused again
            answer["content"] = "User has a border collie called Biscuit"
        return json.dumps(answer)

    llm.responder = with_summaries(lambda _: "", lossy)
    seed(live)
    await age(db_conn)
    report = await consolidation.summarize(runtime(**LOOSE), owners=[U1])
    result = report.results[0]
    assert (result.outcome, len(result.summaries), result.merged) == (Outcome.APPLIED, 1, 2)
    assert result.skipped == (
        "cluster of 3 memories (Personal): the summary leaves out 'alvarez' (s3), 'dr' (s3), "
        "'riverside' (s3)",
    )
    sent = summary_requests(llm)
    assert len(sent) == 3  # dog cluster twice (one repair), coffee once
    assert "Your previous answer was not valid: the summary leaves out 'alvarez'" in str(
        sent[1]["messages"][-1]["content"]
    )
    dog = await (
        await db_conn.execute(
            "SELECT status FROM memories WHERE content LIKE '%%Biscuit%%' ORDER BY seq"
        )
    ).fetchall()
    assert dog == [("active",)] * 3


async def test_an_unreachable_llm_changes_nothing_and_stops_the_run(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
) -> None:
    seed(live)
    await age(db_conn)
    state = await snapshot(db_conn)
    rt = runtime(LLM_BASE_URL="http://127.0.0.1:9/v1")
    report = await consolidation.summarize(rt)
    assert [(str(r.owner), r.outcome) for r in report.results] == [
        ("folder:f1", Outcome.NOTHING),
        ("user:u1", Outcome.FAILED),
    ]
    assert report.failed and report.stopped is not None
    assert report.stopped.startswith("the LLM at http://127.0.0.1:9/v1 is unreachable")
    assert await snapshot(db_conn) == state
    assert (
        await count(db_conn, "SELECT count(*) FROM consolidation_runs WHERE outcome = 'failed'")
        == 1
    )


async def test_a_source_changed_while_the_llm_wrote_is_left_alone(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
    llm: LLMStub,
    database_url: str,
) -> None:
    def edit_then_merge(request: dict[str, Any]) -> str:
        if "Biscuit" in str(request["messages"][-1]["content"]):
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute(
                    "UPDATE memories SET content = 'Biscuit is a sheepdog', "
                    "updated_at = now() WHERE content = 'Biscuit is a border collie'"
                )
        return faithful_merge(request)

    llm.responder = with_summaries(lambda _: "", edit_then_merge)
    seed(live)
    await age(db_conn)
    result = (await consolidation.summarize(runtime(**LOOSE), owners=[U1])).results[0]
    assert [s.content[:11] for s in result.summaries] == ["User drinks"]
    assert result.skipped == ("cluster of 3 memories (Personal): a source changed since planning",)
    dog = await (
        await db_conn.execute(
            "SELECT content, status FROM memories WHERE content LIKE '%%Biscuit%%' ORDER BY seq"
        )
    ).fetchall()
    assert [s for _, s in dog] == ["active"] * 3


def test_dry_run_prints_the_plan_and_changes_nothing(
    live: LiveService,
    database_url: str,
    llm: LLMStub,
) -> None:
    seed(live)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE memories SET created_at = created_at - interval '30 days'")
        seqs = dict(conn.execute("SELECT content, seq FROM memories").fetchall())
        before = conn.execute("SELECT id, status, updated_at FROM memories ORDER BY seq").fetchall()
    result = CliRunner().invoke(
        cli, ["summarize", "--all", "--dry-run", "--show-text"], env={"DATABASE_URL": database_url}
    )
    assert result.exit_code == 0, result.output
    coffee = " ".join(f"#{seqs[s['content']]}" for s in SEED[3:5])
    assert result.stdout.splitlines() == [
        "user:u1: 10 active → 9 after",
        f"  merge duplicates Personal             {coffee}",
        f"      #{seqs[SEED[3]['content']]} User drinks an oat-milk flat white every morning",
        f"      #{seqs[SEED[4]['content']]} Every morning the user has a flat white with oat milk",
        "dry run: 2 owners looked at; 1 would change, 0 would be refused; nothing was changed",
    ]
    with psycopg.connect(database_url) as conn:
        after = conn.execute("SELECT id, status, updated_at FROM memories ORDER BY seq").fetchall()
    assert after == before and summary_requests(llm) == []


def test_summarize_needs_an_owner_or_all() -> None:
    result = CliRunner().invoke(cli, ["summarize"])
    assert (result.exit_code, result.stderr) == (
        2,
        "error: say whose memories to consolidate: --user ID, --folder ID or --all\n",
    )


async def test_restore_brings_the_sources_back_and_pins_them(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
    database_url: str,
) -> None:
    seeded = seed(live)
    await age(db_conn)
    rt = runtime(**LOOSE)
    first = await consolidation.summarize(rt, owners=[U1])
    dog = next(s for s in first.results[0].summaries if "Biscuit" in s.content)
    source = next(m["id"] for m in seeded if m["content"] == "Biscuit is a border collie")

    result = await asyncio.to_thread(
        CliRunner().invoke, cli, ["restore", source], env={"DATABASE_URL": database_url}
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        f"restored 3 memories of summary {dog.id} (#{dog.seq}); the summary is archived"
    )
    rows = await (
        await db_conn.execute(
            "SELECT status, superseded_by FROM memories WHERE content LIKE 'User''s dog%%' "
            "OR content LIKE 'Biscuit%%' ORDER BY seq"
        )
    ).fetchall()
    assert rows == [("active", None)] * 3 + [("archived", None)]
    assert (
        await count(
            db_conn, "SELECT count(*) FROM memory_events WHERE action = 'restore' AND actor = 'cli'"
        )
        == 3
    )

    again = await consolidation.summarize(rt, owners=[U1])
    assert again.results[0].outcome is Outcome.NOTHING  # restored memories are pinned
    missing = await asyncio.to_thread(
        CliRunner().invoke, cli, ["restore", str(uuid.uuid4())], env={"DATABASE_URL": database_url}
    )
    assert missing.exit_code == 1 and missing.stderr.startswith("error: no memory ")


async def test_beyond_the_cap_the_oldest_are_archived_and_one_can_be_restored(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
    database_url: str,
) -> None:
    seeded = seed(live)
    await age(db_conn)
    await db_conn.execute(  # the dog's name is the oldest memory
        "UPDATE memories SET created_at = created_at - interval '1 day' WHERE content = %s",
        (SEED[0]["content"],),
    )
    result = (await consolidation.summarize(runtime(MEMORY_CAP="8"), owners=[U1])).results[0]
    # 10 active: the coffee pair becomes 1 (9), then 1 is pruned to reach the cap of 8
    assert (result.outcome, len(result.summaries), result.merged, result.pruned) == (
        Outcome.APPLIED,
        1,
        2,
        1,
    )
    assert [m.content for m in result.plan.prune] == [SEED[0]["content"]]
    pruned = next(m["id"] for m in seeded if m["content"] == SEED[0]["content"])
    events = await (
        await db_conn.execute(
            "SELECT action, reason FROM memory_events"
            " WHERE memory_id = %s AND actor = 'summarizer'",
            (uuid.UUID(pruned),),
        )
    ).fetchall()
    assert events == [("archive", "pruned beyond the cap of 8 (fifo)")]
    restored = await asyncio.to_thread(
        CliRunner().invoke, cli, ["restore", pruned], env={"DATABASE_URL": database_url}
    )
    assert restored.stdout.splitlines()[0] == f"restored pruned memory {pruned}"
    assert SEED[0]["content"] in active_texts(live)


# --- triggers -----------------------------------------------------------------------------


async def _wait_for_run(db_conn: psycopg.AsyncConnection, trigger: str) -> tuple[Any, ...]:
    async def run() -> tuple[Any, ...] | None:
        row = await (
            await db_conn.execute(
                "SELECT owner_id, outcome, active_before, active_after, summaries, merged "
                "FROM consolidation_runs WHERE trigger = %s",
                (trigger,),
            )
        ).fetchone()
        return None if row is None else tuple(row)

    found = await wait_until_async(run, what=f"a {trigger} run")
    assert found is not None
    return found


async def test_an_owner_near_the_cap_is_consolidated_after_extraction(
    service_factory,
    llm: LLMStub,
    db_conn: psycopg.AsyncConnection,  # type: ignore[no-untyped-def]
) -> None:
    """The limit trigger: at 80 % of the cap the worker frees about 20 % of it."""
    facts = {
        f"dog fact {i}": [new_op(text, tags=["possession"])]
        for i, text in enumerate(
            [
                "User's dog is named Biscuit",
                "Biscuit is a border collie",
                "Biscuit's vet is Dr. Alvarez at the Riverside clinic",
            ]
        )
    }
    facts |= {
        f"other fact {i}": [new_op(text)]
        for i, text in enumerate(
            [
                "User lives in Valencia",
                "User's sister Noor is a marine biologist",
                "User is vegetarian",
                "User plays the cello",
                "User keeps two beehives",
            ]
        )
    }
    llm.responder = answers(facts)
    live = service_factory(
        LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model", MEMORY_CAP="10", **LOOSE
    )
    _say(live, list(facts)[:7])
    assert await count(db_conn, "SELECT count(*) FROM consolidation_runs") == 0
    _say(live, list(facts)[7:], first=7)  # the 8th memory reaches 80 % of the cap of 10
    run = await _wait_for_run(db_conn, "limit")
    assert run == ("u1", "applied", 8, 6, 1, 3)
    assert sorted(t for t in active_texts(live) if "Biscuit" in t) == [
        "User's dog is named Biscuit; Biscuit is a border collie; "
        "Biscuit's vet is Dr. Alvarez at the Riverside clinic"
    ]


async def test_the_daily_summarizer_is_a_periodic_job_on_the_consolidation_queue(
    live: LiveService,
    db_conn: psycopg.AsyncConnection,
    database_url: str,
) -> None:
    jobs = build_job_app(database_url)
    [(key, periodic)] = jobs.periodic_registry.periodic_tasks.items()
    assert key == ("summarize_all", "daily_summarizer")
    assert (periodic.cron, periodic.task.queue) == ("0 3 * * *", "consolidation")
    seed(live)
    await age(db_conn)
    async with jobs.open_async():  # what the periodic deferrer does at 03:00
        await jobs.configure_task("summarize_all").defer_async(timestamp=int(time.time()))
    assert await _wait_for_run(db_conn, "daily") == ("u1", "applied", 10, 9, 1, 2)


async def test_the_daily_run_consolidates_a_users_memory_of_an_assistant_on_its_own(
    live: LiveService,
    runtime: RuntimeFactory,
    db_conn: psycopg.AsyncConnection,
) -> None:
    """The coffee pair in u1's memory for the assistant "coder" is merged there; the same
    fact in u1's Personal bank is another owner's and stays as it was."""
    coffee = [SEED[3]["content"], SEED[4]["content"]]
    for content in coffee:
        answer = live.client.post(
            "/v1/users/u1/memories",
            json={"content": content, "bank": "assistant", "assistant_id": "coder"},
        )
        assert answer.status_code == 201, answer.text
    assert live.client.post("/v1/users/u1/memories", json={"content": coffee[0]}).status_code == 201
    await age(db_conn)
    report = await consolidation.summarize(runtime())
    assert [r.owner for r in report.results if r.outcome is Outcome.APPLIED] == [
        Owner(OwnerKind.ASSISTANT, '["u1","coder"]')
    ]
    rows = await (
        await db_conn.execute(
            "SELECT owner_id, bank, status, source_kind FROM memories ORDER BY seq"
        )
    ).fetchall()
    assert rows == [
        ('["u1","coder"]', "assistant", "archived", "manual"),
        ('["u1","coder"]', "assistant", "archived", "manual"),
        ("u1", "personal", "active", "manual"),
        ('["u1","coder"]', "assistant", "active", "summary"),
    ]
