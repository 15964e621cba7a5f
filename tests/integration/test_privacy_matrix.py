"""Every cell of the DESIGN §3 table, read and write, each with a memory that must appear
and one that must not — over real HTTP against the real database."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from testkit.extraction_replies import by_message, new_op
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

# What user "ann" and folder "proj" hold, plus memories that belong to others.
SEEDED = {
    "personal": "Ann keeps two beehives",
    "interaction_patterns": "Ann wants answers as short bullet lists",
    "project": "The project uses PostgreSQL sixteen",
}
OTHERS = ["Ben keeps a secret diary", "The other project uses MongoDB"]

CHATS = {
    "private saved": {"kind": "saved", "folder_id": "proj"},
    "private saved, no folder": {"kind": "saved"},
    "channel": {
        "kind": "channel",
        "collaborative": True,
        "collaborative_reason": "channel",
        "chat_id": "channel:team",
    },
    "shared folder": {
        "kind": "saved",
        "folder_id": "proj",
        "collaborative": True,
        "collaborative_reason": "folder_shared",
    },
    "sender is not owner": {
        "kind": "saved",
        "folder_id": "proj",
        "collaborative": True,
        "collaborative_reason": "sender_not_owner",
    },
    "temporary (reading allowed)": {
        "kind": "temporary",
        "folder_id": "proj",
        "chat_id": "temporary:abc",
    },
    "temporary (reading off)": {
        "kind": "temporary",
        "folder_id": "proj",
        "chat_id": "temporary:abc",
        "read_in_temporary": False,
    },
    "api": {"kind": "api", "chat_id": ""},
    "automated": {"kind": "automated"},
    "task": {"kind": "task"},
}

# DESIGN §3: which banks each chat may read and write.
READS = {
    "private saved": {"personal", "interaction_patterns", "project"},
    "private saved, no folder": {"personal", "interaction_patterns"},
    "channel": {"interaction_patterns"},
    "shared folder": {"interaction_patterns", "project"},
    "sender is not owner": {"interaction_patterns", "project"},
    "temporary (reading allowed)": {"personal", "interaction_patterns", "project"},
    "temporary (reading off)": set(),
    "api": set(),
    "automated": set(),
    "task": set(),
}
WRITES = {
    "private saved": {"personal", "interaction_patterns", "project"},
    "private saved, no folder": {"personal", "interaction_patterns"},
    "channel": {"interaction_patterns"},
    "shared folder": {"interaction_patterns", "project"},
    "sender is not owner": {"interaction_patterns", "project"},
    "temporary (reading allowed)": set(),
    "temporary (reading off)": set(),
    "api": set(),
    "automated": set(),
    "task": set(),
}


def _chat(name: str) -> dict[str, object]:
    return {"user_id": "ann", "user_name": "Ann", "chat_id": "c-1", **CHATS[name]}


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(
        responder=by_message(
            {
                "Note for memory": [
                    new_op("Written personal fact", bank="personal"),
                    new_op("Written pattern fact", bank="interaction_patterns"),
                    new_op("Written project fact", bank="project"),
                ]
            }
        )
    ) as stub:
        yield stub


@pytest.fixture
def seeded(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    live = service_factory(
        LLM_BASE_URL=llm.base_url,
        LLM_MODEL="m",
        MEMORY_CORE_ITEMS="50",
        MEMORY_BUDGET_TOKENS="4000",
    )
    for bank, content in SEEDED.items():
        live.client.post(
            "/v1/users/ann/memories",
            json={
                "content": content,
                "bank": bank,
                "folder_id": "proj" if bank == "project" else None,
            },
        )
    live.client.post("/v1/users/ben/memories", json={"content": OTHERS[0]})
    live.client.post(
        "/v1/users/ben/memories",
        json={"content": OTHERS[1], "bank": "project", "folder_id": "other"},
    )
    return live


@pytest.mark.parametrize("chat_name", list(CHATS))
def test_reads_follow_the_table(seeded: LiveService, chat_name: str) -> None:
    block = seeded.client.post(
        "/v1/context",
        json={"chat": _chat(chat_name), "message": "What do you know about me and the project?"},
    ).json()["block"]
    listing = seeded.client.post(
        "/v1/commands", json={"chat": _chat(chat_name), "command": "/memory list"}
    ).json()["text"]
    for bank, content in SEEDED.items():
        must = bank in READS[chat_name]
        assert (content in block) is must, (bank, "context")
        if CHATS[chat_name]["kind"] not in ("api", "automated", "task"):
            assert (content in listing) is must, (bank, "list")
    for content in OTHERS:
        assert content not in block and content not in listing


@pytest.mark.parametrize("chat_name", list(CHATS))
def test_writes_follow_the_table(seeded: LiveService, chat_name: str) -> None:
    answer = seeded.client.post(
        "/v1/turns",
        json={
            "chat": _chat(chat_name),
            "user_message_id": f"m-{chat_name}",
            "user_message": "Note for memory: three facts.",
            "assistant_message": "OK",
        },
    ).json()
    seeded.wait_for_extraction()
    written = {}
    for item in seeded.client.get("/v1/users/ann/memories?folder_id=proj").json()["items"]:
        if item["content"].startswith("Written"):
            written[item["bank"]] = item
    assert set(written) == WRITES[chat_name]
    if WRITES[chat_name]:
        assert answer["status"] == "queued"
        assert written["interaction_patterns"]["owner_id"] == "ann"
    if "project" in written:
        assert written["project"]["owner_id"] == "proj"
    ben = seeded.client.get("/v1/users/ben/memories").json()["items"]
    assert [m["content"] for m in ben] == [OTHERS[0]]


def test_collaborative_turn_of_b_never_uses_a_private_memory(seeded: LiveService) -> None:
    """Case 37: in a chat A and B share, B's turn gets nothing private of A, and what B says
    there is stored for B (the speaker), never for the chat's owner."""
    shared = {
        "user_id": "ben",
        "chat_id": "shared-chat",
        "kind": "saved",
        "folder_id": "proj",
        "collaborative": True,
        "collaborative_reason": "sender_not_owner",
    }
    block = seeded.client.post(
        "/v1/context",
        json={
            "chat": shared,
            "message": "Pick a restaurant for our team dinner; Ann keeps beehives?",
        },
    ).json()["block"]
    assert SEEDED["personal"] not in block
    assert SEEDED["interaction_patterns"] not in block
    assert SEEDED["project"] in block
    seeded.client.post(
        "/v1/turns",
        json={
            "chat": shared,
            "user_message_id": "b-1",
            "user_message": "Note for memory: from Ben.",
        },
    )
    seeded.wait_for_extraction()
    ann = {m["content"] for m in seeded.client.get("/v1/users/ann/memories").json()["items"]}
    ben = {m["content"] for m in seeded.client.get("/v1/users/ben/memories").json()["items"]}
    assert "Written pattern fact" in ben and "Written pattern fact" not in ann
    assert "Written personal fact" not in ben | ann


async def test_interleaved_users_each_keep_only_their_own_facts(service_factory) -> None:  # type: ignore[no-untyped-def]
    """Case 29: 20 interleaved turns of two users, each fact stored once under its owner."""

    def respond(request: dict) -> str:  # echo the fact of the message back as a memory
        import json
        import re

        from testkit.extraction_replies import new_user_message

        fact = re.search(r"([AB]-fact-\d+: [^.]+)", new_user_message(request))
        ops = [new_op(f"User says {fact.group(1)}")] if fact else []
        return json.dumps({"operations": ops})

    with LLMStub(responder=respond) as llm:
        live = service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="m")
        colours = [
            "blue",
            "green",
            "red",
            "teal",
            "amber",
            "black",
            "white",
            "pink",
            "grey",
            "gold",
        ]
        async with httpx.AsyncClient(
            base_url=live.base_url, headers={"Authorization": f"Bearer {live.api_key}"}
        ) as client:
            sends = []
            for i in range(10):
                for who, thing in (("A", "locker"), ("B", "bike")):
                    sends.append(
                        client.post(
                            "/v1/turns",
                            json={
                                "chat": {
                                    "user_id": f"user-{who}",
                                    "chat_id": f"{who}-{i}",
                                    "kind": "saved",
                                },
                                "user_message_id": f"{who}{i}",
                                "user_message": f"{who}-fact-{i:02d}: my {thing} is {colours[i]}.",
                            },
                        )
                    )
            answers = await asyncio.gather(*sends)
        assert {a.json()["status"] for a in answers} == {"queued"}
        live.wait_for_extraction(timeout_s=120)
    for who in ("A", "B"):
        items = live.client.get(f"/v1/users/user-{who}/memories?limit=200").json()["items"]
        facts = sorted(m["content"] for m in items)
        assert len(facts) == 10 == len(set(facts))
        assert all(f"{who}-fact-" in fact for fact in facts)
