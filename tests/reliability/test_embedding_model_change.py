"""Case 35: a changed embedding model never breaks memory.

- Another 384-dimension model: at start the old vectors are dropped, keyword search finds the
  memories meanwhile, a background job re-embeds them, then vector search finds them again.
- A model of another dimension (768): the same, the column takes vectors of any dimension;
  switching back to the bundled 384-dimension model re-embeds once more.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from service.embeddings.encoder import Encoder
from testkit.extraction_replies import by_message, new_op
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until
from tests.reliability.support import metric, record_figures, renamed_model, scrape, wide_model

USER = "cat-owner"
CHAT = {"user_id": USER, "chat_id": "chat-cats", "kind": "saved"}
FACTS = [
    "User has a cat named Miso",
    "User's cat Miso is afraid of the vacuum cleaner",
    "User works as a translator",
    "User lives in Ghent",
    "User plays badminton on Fridays",
]


def _embedding_models(url: str) -> list[tuple[str | None, int]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT embedding_model, count(*) FROM memories WHERE status = 'active' "
            "GROUP BY 1 ORDER BY 1"
        ).fetchall()


def _wait(live: LiveService, predicate, timeout_s: float = 90) -> dict:  # type: ignore[no-untyped-def]
    def state() -> dict | None:  # type: ignore[type-arg]
        found = live.client.get("/v1/admin/embeddings").json()
        return found if predicate(found) else None

    return wait_until(state, what="the embeddings state", timeout_s=timeout_s)  # type: ignore[return-value]


def _store_facts_with(encoder: Encoder, *, database_url: str, state_dir: Path) -> None:
    """Store FACTS through a service running `encoder`, then stop it."""
    first = LiveService.start(database_url=database_url, encoder=encoder, state_dir=state_dir)
    try:
        for fact in FACTS:
            assert (
                first.client.post(f"/v1/users/{USER}/memories", json={"content": fact}).status_code
                == 201
            )
    finally:
        first.stop()


def test_another_384_dimension_model_re_embeds_in_the_background(
    database_url: str, encoder: Encoder, tmp_path: Path
) -> None:
    _store_facts_with(encoder, database_url=database_url, state_dir=tmp_path / "s1")
    assert _embedding_models(database_url) == [("all-MiniLM-L6-v2", 5)]

    variant = Encoder(renamed_model(tmp_path / "minilm-variant"))
    try:
        # 1. Started without workers: the switch is detected, nothing is re-embedded yet.
        waiting = LiveService.start(
            database_url=database_url,
            encoder=variant,
            state_dir=tmp_path / "s2",
            env={"MEMORY_RUN_WORKERS": "false"},
        )
        try:
            state = waiting.client.get("/v1/admin/embeddings").json()
            assert (state["model"], state["dimension"], state["memories_waiting"]) == (
                "minilm-variant",
                384,
                5,
            )
            assert _embedding_models(database_url) == [(None, 5)]
            found = waiting.client.get(
                f"/v1/users/{USER}/memories/search", params={"q": "cat"}
            ).json()["items"]
            assert sorted(m["content"] for m in found) == sorted(FACTS[:2])
            context = waiting.client.post(
                "/v1/context", json={"chat": CHAT, "message": "How many cats do I have?"}
            )
            assert context.status_code == 200
            # only core memories reach the prompt now, without any vector similarity
            assert {m["similarity"] for m in context.json()["memories"]} == {0.0}
            assert (
                waiting.client.post(
                    "/v1/turns",
                    json={
                        "chat": CHAT,
                        "user_message_id": "m1",
                        "user_message": "I just adopted a second cat.",
                    },
                ).status_code
                == 202
            )
            added = waiting.client.post(
                f"/v1/users/{USER}/memories", json={"content": "User is allergic to pollen"}
            )
            assert added.status_code == 201
            assert waiting.client.get("/v1/admin/embeddings").json()["memories_waiting"] == 5
            assert metric(scrape(waiting), "memories_without_vector") == 5
        finally:
            waiting.stop()

        # 2. With workers: the re-embedding job runs, the waiting turn is extracted.
        with LLMStub(
            responder=by_message(
                {"second cat": [new_op("User adopted a second cat", tags=["possession"])]}
            )
        ) as llm:
            working = LiveService.start(
                database_url=database_url,
                encoder=variant,
                state_dir=tmp_path / "s3",
                env={"LLM_BASE_URL": llm.base_url, "LLM_MODEL": "stub-model"},
            )
            try:
                working.wait_for_extraction()
                state = _wait(working, lambda s: s["memories_waiting"] == 0)
                assert state["memories_waiting"] == 0, state
                assert state["memories_by_model"] == {"minilm-variant": 7}
                context = working.client.post(
                    "/v1/context", json={"chat": CHAT, "message": "How many cats do I have?"}
                ).json()
                by_content = {m["content"]: m["similarity"] for m in context["memories"]}
                for fact in (*FACTS[:2], "User adopted a second cat"):
                    assert by_content.get(fact, 0) > 0.6, (fact, by_content)
                assert metric(scrape(working), "memories_without_vector") == 0
            finally:
                working.stop()
    finally:
        variant.close()
    assert _embedding_models(database_url) == [("minilm-variant", 7)]
    record_figures(
        "embedding_model_change",
        {
            "memories_before": 5,
            "re_embedded": 5,
            "stored_meanwhile": 2,
            "requests_meanwhile_status": [200, 202, 201],
            "vectors_of_new_model_after": 7,
        },
    )


def _dimensions(url: str) -> list[tuple[str | None, int | None, int]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT embedding_model, vector_dims(embedding), count(*) FROM memories "
            "WHERE status = 'active' GROUP BY 1, 2 ORDER BY 1"
        ).fetchall()


def test_a_model_of_another_dimension_re_embeds_in_the_background_and_back(
    database_url: str, encoder: Encoder, tmp_path: Path
) -> None:
    _store_facts_with(encoder, database_url=database_url, state_dir=tmp_path / "s1")
    assert _dimensions(database_url) == [("all-MiniLM-L6-v2", 384, 5)]

    wide = Encoder(wide_model(tmp_path / "wide-768"), backend="torch")
    try:
        # 1. Without workers: the 384-d vectors are dropped, keyword search still finds them.
        waiting = LiveService.start(
            database_url=database_url,
            encoder=wide,
            state_dir=tmp_path / "s2",
            env={"MEMORY_RUN_WORKERS": "false"},
        )
        try:
            state = waiting.client.get("/v1/admin/embeddings").json()
            assert (state["model"], state["dimension"], state["memories_waiting"]) == (
                "wide-768",
                768,
                5,
            )
            assert _dimensions(database_url) == [(None, None, 5)]
            found = waiting.client.get(
                f"/v1/users/{USER}/memories/search", params={"q": "cat"}
            ).json()["items"]
            assert sorted(m["content"] for m in found) == sorted(FACTS[:2])
            assert (
                waiting.client.post(
                    "/v1/context", json={"chat": CHAT, "message": "How many cats do I have?"}
                ).status_code
                == 200
            )
            # a memory added meanwhile gets a 768-d vector at once
            assert (
                waiting.client.post(
                    f"/v1/users/{USER}/memories", json={"content": "User is allergic to pollen"}
                ).status_code
                == 201
            )
            assert waiting.client.get("/v1/admin/embeddings").json()["memories_waiting"] == 5
        finally:
            waiting.stop()

        # 2. With workers: everything is re-embedded at 768 dimensions and vector search works.
        working = LiveService.start(
            database_url=database_url, encoder=wide, state_dir=tmp_path / "s3"
        )
        try:
            state = _wait(working, lambda s: s["memories_waiting"] == 0)
            assert state["memories_by_model"] == {"wide-768": 6}, state
            context = working.client.post(
                "/v1/context", json={"chat": CHAT, "message": "Miso the cat"}
            ).json()
            assert any(m["similarity"] > 0 for m in context["memories"]), context
        finally:
            working.stop()
    finally:
        wide.close()
    assert _dimensions(database_url) == [("wide-768", 768, 6)]

    # 3. Back to the bundled 384-d model: re-embedded again, similarities meaningful again.
    back = LiveService.start(database_url=database_url, encoder=encoder, state_dir=tmp_path / "s4")
    try:
        state = _wait(back, lambda s: s["memories_waiting"] == 0)
        assert state["memories_by_model"] == {"all-MiniLM-L6-v2": 6}, state
        context = back.client.post(
            "/v1/context", json={"chat": CHAT, "message": "How many cats do I have?"}
        ).json()
        by_content = {m["content"]: m["similarity"] for m in context["memories"]}
        assert by_content.get(FACTS[0], 0) > 0.5, by_content
    finally:
        back.stop()
    assert _dimensions(database_url) == [("all-MiniLM-L6-v2", 384, 6)]
    record_figures(
        "embedding_dimension_change",
        {
            "memories_before": 5,
            "dimension_before": 384,
            "dimension_after": 768,
            "re_embedded_to_768": 5,
            "stored_meanwhile": 1,
            "re_embedded_back_to_384": 6,
        },
    )
