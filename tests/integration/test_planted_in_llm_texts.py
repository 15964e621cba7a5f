"""A planted instruction that only the semantic layer of the check catches (no rule matches
it) is refused when it arrives in a reminder or in an LLM-written profile (issue 27, item 2):
these paths ask the same `flows/planted_check.verdicts` as turns and imports. Before, they had
the rules only: the reminder was set (201) and the profile stored ("written").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.core import planted, safety
from service.core.profile import ProfileView
from service.core.records import OwnerKind
from service.embeddings.encoder import Encoder
from service.flows import consolidation
from service.flows import profile as profile_flow
from service.flows.consolidation import Owner
from service.flows.runtime import Runtime
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.summary_replies import faithful_merge, is_summary_request, with_summaries
from tests.support.races import race_runtime, seed

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "corpora" / "planted.json").read_text("utf-8")
)["cases"]


@pytest.fixture(scope="module")
def semantic_only(encoder: Encoder) -> str:
    """The first harmful text of the report half that no rule catches and the nearest
    labelled examples refuse (without an LLM)."""
    ex = planted.examples()
    harmful = encoder.encode_sync(list(ex.harmful))
    legitimate = encoder.encode_sync(list(ex.legitimate))
    for case in CASES:
        text = case["text"]
        if case["split"] != "report" or case["label"] != "harmful":
            continue
        if safety.looks_like_instruction(text) or not text.rstrip().endswith("."):
            continue
        vector = encoder.encode_sync([text])[0]
        margin = planted.semantic_margin(vector, harmful, legitimate)
        if planted.judge(text, margin, planted.nearest_harmful(vector, harmful)).refused:
            return str(text)
    raise AssertionError("no harmful text of the report half is caught by the semantic layer only")


def test_a_reminder_with_a_planted_instruction_is_refused(
    service: LiveService, semantic_only: str
) -> None:
    answer = service.client.post(
        "/v1/users/u1/reminders", json={"content": semantic_only, "due_at": "2030-01-01T09:00:00Z"}
    )
    assert answer.status_code == 400, answer.text
    assert "not instructions" in answer.json()["detail"]
    assert service.client.get("/v1/users/u1/reminders").json()["total"] == 0


@pytest.fixture
def profile_llm(semantic_only: str) -> Iterator[LLMStub]:
    """An LLM that plants the instruction: in its profile between two ordinary sentences,
    and after its faithful merge of a consolidation cluster."""
    answer = f"Ana keeps bees and lives in Porto. {semantic_only} She prefers short answers."

    def summary(request: dict[str, Any]) -> str:
        merged = json.loads(faithful_merge(request))
        return json.dumps({**merged, "content": f"{merged['content']}. {semantic_only}"})

    with LLMStub(responder=with_summaries(lambda _: answer, summary)) as stub:
        yield stub


@pytest.fixture
async def rt(
    database_url: str, encoder: Encoder, tmp_path: Path, profile_llm: LLMStub
) -> AsyncIterator[Runtime]:
    async with race_runtime(
        database_url, encoder, tmp_path / "state", llm_base_url=profile_llm.base_url
    ) as runtime:
        yield runtime


async def test_a_profile_with_a_planted_instruction_is_not_stored(rt: Runtime) -> None:
    for fact in (
        "keeps bees",
        "lives in Porto",
        "has a cargo bike",
        "plays chess",
        "reads Saramago",
    ):
        await seed(rt, user_id="ana", content=f"User {fact}")
    outcome = await profile_flow.refresh_profile(rt, user_id="ana", view=ProfileView.PRIVATE)
    assert outcome == "refused"


async def test_a_consolidation_summary_with_a_planted_instruction_is_not_stored(
    rt: Runtime, profile_llm: LLMStub, db_conn: psycopg.AsyncConnection
) -> None:
    pair = (
        "User drinks an oat-milk flat white every morning",
        "Every morning the user has a flat white with oat milk",
    )
    for text in pair:
        await seed(rt, user_id="ana", content=text)
    await db_conn.execute(
        "UPDATE memories SET created_at = created_at - interval '30 days', "
        "updated_at = updated_at - interval '30 days'"
    )
    await consolidation.summarize(rt, owners=[Owner(OwnerKind.USER, "ana")])
    assert [r for r in profile_llm.requests if is_summary_request(r)]  # it was asked
    active = await (
        await db_conn.execute("SELECT content FROM memories WHERE status = 'active' ORDER BY seq")
    ).fetchall()
    assert [c for (c,) in active] == list(pair)
