"""Assistant Memory, the DESIGN §3 row for a workspace model an admin gave its own memory,
over real HTTP against the real database: for every pair of cells it touches, a memory that
must appear and one that must not — in the injected block and in `/memory list` — and
where each kind of chat writes what extraction finds.

User "ann" holds Personal, Interaction Patterns, Project Memory of folder "proj", Chat Memory
of chat "c-1", and her memory for the assistants "coder" and "writer"; user "ben" holds his
memory for "coder".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testkit.extraction_replies import by_message, new_op, new_user_message
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from testkit.waiting import wait_until, wait_until_async

SEEDED = {
    "personal": "Ann keeps two beehives",
    "interaction_patterns": "Ann wants answers as short bullet lists",
    "project": "The project uses PostgreSQL sixteen",
    "chat": "In this chat Ann is drafting a toast for Sam",
    "coder": "Ann writes her services in Rust",
    "writer": "Ann is writing a novel about lighthouse keepers",
    "ben coder": "Ben deploys everything with Nomad",
}

ORDINARY = {"kind": "saved", "folder_id": "proj", "chat_id": "c-1"}
CHATS: dict[str, dict[str, Any]] = {
    "coder, private": {**ORDINARY, "assistant_id": "coder", "assistant_name": "Coding Helper"},
    "writer, private": {**ORDINARY, "assistant_id": "writer", "assistant_name": "Story Coach"},
    "ordinary, private": ORDINARY,
    "coder, shared": {
        **ORDINARY,
        "assistant_id": "coder",
        "collaborative": True,
        "collaborative_reason": "folder_shared",
    },
    "ordinary, shared": {**ORDINARY, "collaborative": True, "collaborative_reason": "chat_shared"},
    "coder, channel": {
        "kind": "channel",
        "chat_id": "channel:team",
        "collaborative": True,
        "collaborative_reason": "channel",
        "assistant_id": "coder",
    },
    "coder, temporary": {"kind": "temporary", "chat_id": "temporary:x", "assistant_id": "coder"},
    "coder, temporary (reading off)": {
        "kind": "temporary",
        "chat_id": "temporary:x",
        "assistant_id": "coder",
        "read_in_temporary": False,
    },
    "coder, task": {"kind": "task", "chat_id": "c-1", "assistant_id": "coder"},
    "coder, api": {"kind": "api", "chat_id": "", "assistant_id": "coder"},
}

READS = {
    "coder, private": {"coder"},
    "writer, private": {"writer"},
    "ordinary, private": {"personal", "interaction_patterns", "project", "chat"},
    "coder, shared": set(),
    "ordinary, shared": {"interaction_patterns", "project", "chat"},
    "coder, channel": set(),
    "coder, temporary": {"coder"},
    "coder, temporary (reading off)": set(),
    "coder, task": set(),
    "coder, api": set(),
}

# What extraction of one turn writes, by the cell it lands in.
FACTS = ["Ann prefers tabs over spaces", "Ann's cat is called Miso", "The build uses Bazel"]
WRITES = {
    "coder, private": {"ann@coder": set(FACTS)},
    "writer, private": {"ann@writer": set(FACTS)},
    "ordinary, private": {
        "personal": {FACTS[0]},
        "interaction_patterns": {FACTS[1]},
        "project": {FACTS[2]},
    },
    "coder, shared": {},
    "ordinary, shared": {"interaction_patterns": {FACTS[1]}, "project": {FACTS[2]}},
    "coder, channel": {},
    "coder, temporary": {},
    "coder, temporary (reading off)": {},
    "coder, task": {},
    "coder, api": {},
}


def _chat(name: str, user: str = "ann") -> dict[str, Any]:
    return {"user_id": user, "user_name": user.title(), **CHATS[name]}


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(
        responder=by_message(
            {
                "Note for memory": [
                    new_op(FACTS[0], bank="personal"),
                    new_op(FACTS[1], bank="interaction_patterns"),
                    new_op(FACTS[2], bank="project"),
                ]
            }
        )
    ) as stub:
        yield stub


def seed(live: LiveService) -> None:
    """Every cell of the table holds one memory (Chat Memory through its chat's command)."""
    post = live.client.post
    for bank in ("personal", "interaction_patterns", "project"):
        body = {"content": SEEDED[bank], "bank": bank, "folder_id": "proj"}
        if bank != "project":
            body.pop("folder_id")
        assert post("/v1/users/ann/memories", json=body).status_code == 201
    for user, assistant, key in (
        ("ann", "coder", "coder"),
        ("ann", "writer", "writer"),
        ("ben", "coder", "ben coder"),
    ):
        answer = post(
            f"/v1/users/{user}/memories",
            json={"content": SEEDED[key], "bank": "assistant", "assistant_id": assistant},
        )
        assert answer.status_code == 201, answer.text
        assert answer.json()["assistant_id"] == assistant
    added = post(
        "/v1/commands",
        json={"chat": _chat("ordinary, private"), "command": f"/memory add chat: {SEEDED['chat']}"},
    ).json()["text"]
    assert added.startswith("Remembered in Chat Memory")


@pytest.fixture
def seeded(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    live = service_factory(
        LLM_BASE_URL=llm.base_url,
        LLM_MODEL="m",
        MEMORY_CORE_ITEMS="50",
        MEMORY_BUDGET_TOKENS="4000",
    )
    seed(live)
    return live


def _cells(live: LiveService) -> dict[str, set[str]]:
    """Contents of every cell, read through the REST API (active memories)."""
    found: dict[str, set[str]] = {}
    for user, assistant in (("ann", "coder"), ("ann", "writer"), ("ben", "coder")):
        items = live.client.get(
            f"/v1/users/{user}/memories", params={"assistant_id": assistant, "bank": "assistant"}
        ).json()["items"]
        found[f"{user}@{assistant}"] = {m["content"] for m in items}
    items = live.client.get("/v1/users/ann/memories", params={"folder_id": "proj"}).json()["items"]
    for m in items:
        found.setdefault(m["bank"], set()).add(m["content"])
    return found


@pytest.mark.parametrize("chat_name", list(CHATS))
def test_reads_of_each_chat_follow_the_assistant_row(seeded: LiveService, chat_name: str) -> None:
    chat = _chat(chat_name)
    block = seeded.client.post(
        "/v1/context",
        json={"chat": chat, "message": "What do you know about me, Rust, the novel and beehives?"},
    ).json()["block"]
    listing = seeded.client.post(
        "/v1/commands", json={"chat": chat, "command": "/memory list"}
    ).json()["text"]
    for key, content in SEEDED.items():
        must = key in READS[chat_name]
        assert (content in block) is must, (key, "context")
        if chat["kind"] not in ("api", "task"):
            assert (content in listing) is must, (key, "list")


@pytest.mark.parametrize("chat_name", list(CHATS))
def test_writes_of_each_chat_follow_the_assistant_row(seeded: LiveService, chat_name: str) -> None:
    before = _cells(seeded)
    seeded.client.post(
        "/v1/turns",
        json={
            "chat": _chat(chat_name),
            "user_message_id": "m-1",
            "user_message": "Note for memory: three facts.",
            "assistant_message": "OK",
        },
    )
    seeded.wait_for_extraction()
    after = _cells(seeded)
    added = {cell: after[cell] - before.get(cell, set()) for cell in after}
    assert {cell: facts for cell, facts in added.items() if facts} == WRITES[chat_name]


def test_another_users_chat_with_the_same_assistant_reads_only_their_own(
    seeded: LiveService,
) -> None:
    block = seeded.client.post(
        "/v1/context",
        json={"chat": _chat("coder, private", user="ben"), "message": "Rust or Nomad?"},
    ).json()["block"]
    assert SEEDED["ben coder"] in block
    assert all(SEEDED[k] not in block for k in SEEDED if k != "ben coder")


def _profile_writer(request: dict[str, Any]) -> str:
    if new_user_message(request):
        return '{"operations": []}'
    notes = request["messages"][-1]["content"]
    facts = [line.split(") ", 1)[1] for line in notes.splitlines() if line.startswith("- (")]
    return "PROFILE: " + "; ".join(sorted(facts))


async def test_no_core_profile_goes_into_an_assistant_chat(service_factory, db_conn) -> None:  # type: ignore[no-untyped-def]
    """The profile is written from Personal and Interaction Patterns: with five memories
    there ann gets one; it reaches her ordinary chats only, also past the deadline."""
    with LLMStub(responder=_profile_writer) as llm:
        live = service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="m")
        seed(live)
        for i in range(5):
            live.client.post(
                "/v1/users/ann/memories", json={"content": f"Ann visited city number {i}"}
            )

        def context(name: str) -> dict[str, Any]:
            return live.client.post(
                "/v1/context", json={"chat": _chat(name), "message": "hello"}
            ).json()

        wanted = [SEEDED["personal"], SEEDED["interaction_patterns"]] + [
            f"city number {i}" for i in range(5)
        ]
        # the profile over all seven (earlier ones are rewritten as memories arrive)
        profile = wait_until(
            lambda: (
                (p := context("ordinary, private")["profile"]) and all(w in p for w in wanted) and p
            ),
            what="the profile over all seven memories",
            timeout_s=90,
        )
        assert profile.startswith("PROFILE: ")

        async def every_job_ran() -> bool:
            row = await (
                await db_conn.execute(
                    "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
                )
            ).fetchone()
            return bool(row == (0,))

        # no refresh is left to rewrite it (and drop the cached copy) during the checks below
        await wait_until_async(every_job_ran, what="every profile job", timeout_s=90)
        assert context("ordinary, private")["profile"] == profile
        coder = context("coder, private")
        assert coder["profile"] is None and "PROFILE" not in coder["block"]
        assert all(SEEDED[k] not in coder["block"] for k in SEEDED if k != "coder")
        shown = live.client.post(
            "/v1/commands", json={"chat": _chat("coder, private"), "command": "/memory profile"}
        ).json()["text"]
        assert shown == (
            "**Core memories** (sent with every message in this chat):\n\n"
            + shown.split("\n\n", 1)[1]
        )
        assert SEEDED["coder"] in shown and "PROFILE" not in shown and "city" not in shown
        # past the deadline the inlet falls back to the cached profile: not here
        live.app.state.runtime.settings.context_deadline_s = 0.000001
        assert profile in context("ordinary, private")["block"]
        assert context("coder, private")["block"] == ""


def test_banks_and_list_name_the_assistant(seeded: LiveService) -> None:
    coder = _chat("coder, private")
    banks = seeded.client.post("/v1/commands", json={"chat": coder, "command": "/memory banks"})
    lines = banks.json()["text"].splitlines()
    assert "- **Assistant Memory of Coding Helper**: 1 memory — read, write" in lines
    # hidden, but with the true count of what the sender keeps there (issue 30 item 4)
    assert "- **Personal**: 1 memory — hidden here, no writing here" in lines
    assert "- **Interaction Patterns**: 1 memory — hidden here, no writing here" in lines
    assert "- **Project Memory**: 1 memory — hidden here, no writing here" in lines
    assert "- **Chat Memory**: 1 memory — hidden here, no writing here" in lines
    listing = seeded.client.post(
        "/v1/commands", json={"chat": coder, "command": "/memory list"}
    ).json()["text"]
    assert listing.startswith("**Assistant Memory of Coding Helper** (1):")
    ordinary = seeded.client.post(
        "/v1/commands", json={"chat": _chat("ordinary, private"), "command": "/memory banks"}
    ).json()["text"]
    assert (
        "- **Assistant Memory**: kept with coder (1), writer (1) — hidden here, read and "
        "written only in chats with that assistant"
    ) in ordinary.splitlines()
    shared = seeded.client.post(
        "/v1/commands", json={"chat": _chat("ordinary, shared"), "command": "/memory banks"}
    ).json()["text"]
    assert "- **Assistant Memory**: hidden here" in shared.splitlines()
    # others see a shared chat's answer: no count of the sender's Personal memories there
    assert "- **Personal**: hidden here, no writing here" in shared.splitlines()
    coder_shared = seeded.client.post(
        "/v1/commands", json={"chat": _chat("coder, shared"), "command": "/memory banks"}
    ).json()["text"]
    assert "- **Personal**: hidden here, no writing here" in coder_shared.splitlines()


def test_add_in_an_assistant_chat_writes_only_its_memory(seeded: LiveService) -> None:
    before = _cells(seeded)
    answer = seeded.client.post(
        "/v1/commands",
        json={"chat": _chat("coder, private"), "command": "/memory add I use neovim"},
    ).json()["text"]
    assert answer.startswith("Remembered in Assistant Memory of Coding Helper:")
    refused = seeded.client.post(
        "/v1/commands",
        json={"chat": _chat("coder, private"), "command": "/memory add personal: I use emacs"},
    ).json()["text"]
    assert refused.startswith("That didn't work: Coding Helper keeps its own memory")
    after = _cells(seeded)
    assert {
        c: after[c] - before.get(c, set()) for c in after if after[c] - before.get(c, set())
    } == {"ann@coder": {"User uses neovim"}}


def test_forget_all_in_an_assistant_chat_forgets_only_that_assistants_memory(
    seeded: LiveService,
) -> None:
    chat = _chat("coder, private")
    ask = seeded.client.post("/v1/commands", json={"chat": chat, "command": "/memory forget all"})
    code = ask.json()["text"].rsplit("`/memory forget all ", 1)[1].rstrip("`")
    done = seeded.client.post(
        "/v1/commands", json={"chat": chat, "command": f"/memory forget all {code}"}
    ).json()["text"]
    assert (
        done
        == "Forgot 1 memory of Assistant Memory of Coding Helper. Your other memories were kept."
    )
    cells = _cells(seeded)
    assert cells["ann@coder"] == set()
    assert cells["ann@writer"] == {SEEDED["writer"]} and cells["ben@coder"] == {SEEDED["ben coder"]}
    assert SEEDED["personal"] in cells["personal"]


def test_forget_and_edit_by_id_reach_only_the_chats_cell(seeded: LiveService) -> None:
    writer_list = seeded.client.post(
        "/v1/commands", json={"chat": _chat("writer, private"), "command": "/memory list"}
    ).json()["text"]
    writer_id = writer_list.split("`")[1]
    for command in (f"/memory forget {writer_id}", f"/memory edit {writer_id} changed"):
        answer = seeded.client.post(
            "/v1/commands", json={"chat": _chat("coder, private"), "command": command}
        ).json()["text"]
        assert answer == f"That didn't work: there is no memory {writer_id} that this chat may see."
    answer = seeded.client.post(
        "/v1/commands",
        json={"chat": _chat("writer, private"), "command": f"/memory forget {writer_id}"},
    ).json()["text"]
    assert answer.startswith(f"Forgotten `{writer_id}` everywhere.")
    assert _cells(seeded)["ann@writer"] == set()


def test_export_of_an_assistant_chat_holds_only_its_memory_and_imports_back(
    seeded: LiveService,
) -> None:
    import json

    exported = seeded.client.post(
        "/v1/commands", json={"chat": _chat("coder, private"), "command": "/memory export"}
    ).json()["text"]
    data = json.loads(exported.split("```json\n", 1)[1].rsplit("\n```", 1)[0])
    assert [(m["bank"], m["assistant_id"], m["content"]) for m in data] == [
        ("assistant", "coder", SEEDED["coder"])
    ]
    full = seeded.client.get("/v1/users/ann/memories/export").json()
    assert {(m["bank"], m["assistant_id"]) for m in full} >= {
        ("assistant", "coder"),
        ("assistant", "writer"),
        ("personal", None),
    }
    # restored for another user: each assistant's memory goes back to that assistant's cell
    restored = seeded.client.post("/v1/users/cleo/memories/import", json={"memories": full})
    assert restored.status_code == 200, restored.text
    cleo = seeded.client.get(
        "/v1/users/cleo/memories", params={"assistant_id": "writer", "bank": "assistant"}
    ).json()["items"]
    assert [m["content"] for m in cleo] == [SEEDED["writer"]]


def test_deleting_a_user_forgets_their_memory_of_every_assistant(seeded: LiveService) -> None:
    answer = seeded.client.delete("/v1/users/ann/memories").json()
    assert answer["forgotten"] == 5  # Personal, Interaction Patterns, Chat, coder, writer
    cells = _cells(seeded)
    assert cells["ann@coder"] == set() and cells["ann@writer"] == set()
    assert cells["ben@coder"] == {SEEDED["ben coder"]}
    assert cells["project"] == {SEEDED["project"]}


def test_an_assistant_id_too_long_for_its_owner_is_refused_with_a_sentence(
    seeded: LiveService,
) -> None:
    answer = seeded.client.post(
        "/v1/context",
        json={"chat": {**_chat("coder, private"), "assistant_id": "m" * 250}, "message": "hi"},
    )
    assert answer.status_code == 422
    assert "too long" in answer.text
