"""Read-path cases: several memories reach the model (20), non-English text kept intact (24)."""

from __future__ import annotations

import unicodedata

import psycopg

from testkit.extraction_replies import by_message, new_op
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

CHAT = {"user_id": "jonas", "chat_id": "c-1", "kind": "saved"}


def test_several_relevant_memories_reach_the_model(service: LiveService) -> None:
    """Case 20."""
    facts = [
        "User is vegetarian",
        "User owns a beagle",
        "User works nights",
        "User lives in Valencia",
        "User is learning the bassoon",
    ]
    for fact in facts:
        service.client.post("/v1/users/jonas/memories", json={"content": fact})
    block = service.client.post(
        "/v1/context",
        json={
            "chat": CHAT,
            "message": "Plan my next Saturday taking into account what you know about me.",
        },
    ).json()["block"]
    assert sum(fact in block for fact in facts) >= 3


async def test_german_memory_is_stored_intact_and_found_in_both_languages(
    service_factory,
    db_conn: psycopg.AsyncConnection,  # type: ignore[no-untyped-def]
) -> None:
    """Case 24."""
    original = "Ich heiße Jonas und mein Lieblingsgericht sind Käsespätzle 🧀."
    fact = "Jonas' Lieblingsgericht sind Käsespätzle 🧀"
    with LLMStub(responder=by_message({"Käsespätzle": [new_op(fact, tags=["preference"])]})) as llm:
        live = service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="m")
        live.client.post(
            "/v1/turns", json={"chat": CHAT, "user_message_id": "m1", "user_message": original}
        )
        live.wait_for_extraction()
        prompt = llm.requests[-1]["messages"][-1]["content"]
    assert f"<new_user_message>{original}</new_user_message>" in prompt
    row = await (await db_conn.execute("SELECT content FROM memories")).fetchone()
    assert row == (unicodedata.normalize("NFC", fact),)
    for question in ("What's my favourite dish?", "Was esse ich am liebsten?"):
        answer = live.client.post("/v1/context", json={"chat": CHAT, "message": question})
        assert fact in answer.json()["block"]
        assert "\\u00e4" not in answer.text
    found = live.client.post(
        "/v1/commands", json={"chat": CHAT, "command": "/memory search Käsespätzle"}
    )
    assert "Käsespätzle" in found.json()["text"]


def test_a_past_appointment_is_injected_marked_as_past(service: LiveService) -> None:
    # issue 30 item 9b: "dentist on 2026-03-11" was injected on 2026-03-20 as if ahead
    def stated(content: str, on: str) -> dict[str, object]:
        return {"bank": "personal", "content": content, "created_at": f"{on}T09:00:00+00:00"}

    exported = [
        stated("User has a dentist appointment on 2026-03-11", "2026-03-02"),
        stated("User has a dentist check-up on 2026-04-02", "2026-03-02"),
        stated("User was born on 1990-05-04", "2026-03-02"),
    ]
    assert service.client.post("/v1/users/mara/memories/import", json=exported).is_success
    chat = {**CHAT, "user_id": "mara", "timezone": "Europe/Berlin"}

    block = service.client.post(
        "/v1/context",
        json={
            "chat": chat,
            "message": "Do I have a dentist appointment coming up? When was I born?",
            "now": "2026-03-20T08:00:00Z",
        },
    ).json()["block"]

    assert (
        "User has a dentist appointment on 2026-03-11 (past: 2026-03-11 is before today, "
        "2026-03-20)"
    ) in block
    # still ahead, and a date that was never ahead (a birth date): no mark
    assert "User has a dentist check-up on 2026-04-02\n" in block + "\n"
    assert "User was born on 1990-05-04" in block
    assert block.count("(past:") == 1
