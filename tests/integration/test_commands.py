"""`/memory` commands through the real filter, the companion pipe and the service."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from bench.chat_harness import FilterHarness, SavedChat, load_filter_instance
from testkit.extraction_replies import by_message, new_op
from testkit.filter_loader import load_filter
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

PIPE_PATH = load_filter.__defaults__[0].parent / "memory_commands.py"  # type: ignore[index]
TIMESTAMP = 1_780_000_000


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(
        responder=by_message(
            {
                "is under the blue": [new_op("User's spare key is under the blue flowerpot")],
                "oat milk": [new_op("User drinks oat milk")],
            }
        )
    ) as stub:
        yield stub


@pytest.fixture
def live(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")


@pytest.fixture
def harness(live: LiveService) -> FilterHarness:
    instance = load_filter_instance()
    instance.valves = instance.Valves(
        service_url=live.base_url, api_key=live.api_key, inlet_timeout_s=5, outlet_timeout_s=5
    )
    return FilterHarness(instance)


@pytest.fixture
def pipe() -> Any:
    return load_filter(PIPE_PATH).Pipe()


class Session:
    """One user typing in saved chats; commands go filter → service → pipe like in Open WebUI."""

    def __init__(self, harness: FilterHarness, pipe: Any, user_id: str) -> None:
        self.harness, self.pipe = harness, pipe
        self.user = harness.make_user(user_id=user_id, name=user_id.title())
        self.chat = SavedChat(user=self.user, timestamp_s=TIMESTAMP)

    def new_chat(self) -> None:
        self.chat = SavedChat(user=self.user, timestamp_s=TIMESTAMP)

    async def type(self, text: str) -> tuple[str, dict[str, Any]]:
        """Returns (the reply the user sees, the body the inlet passed on)."""
        body, metadata, user_id, assistant_id = self.chat.inlet_request(text)
        seen = await self.harness.inlet(self.chat, body, metadata)
        if seen.body["model"] == "memory_commands":
            reply = await self.pipe.pipe(seen.body, __user__=self.user, __metadata__=metadata)
        else:
            reply = "STUB-REPLY ok"
        out = self.chat.record_turn(
            user_message_id=user_id, text=text, assistant_id=assistant_id, reply=reply
        )
        await self.harness.outlet(self.chat, out, metadata)
        return reply, seen.body


def _ids(listing: str) -> list[str]:
    return re.findall(r"`([0-9a-z]{6})`", listing)


async def test_add_then_list_shows_the_exact_listing(harness, pipe, live, llm) -> None:  # type: ignore[no-untyped-def]
    alice = Session(harness, pipe, "alice")
    added, body = await alice.type("/memory add I keep bees")
    assert body["model"] == "memory_commands"
    code = _ids(added)[0]
    assert added == f"Remembered in Personal:\n\n- `{code}` Personal · {_today()} · User keeps bees"
    listing, _ = await alice.type("/memory list")
    assert listing == f"**Memories** (1):\n\n- `{code}` Personal · {_today()} · User keeps bees"
    assert llm.requests == [], "no LLM call for commands, and commands are not extracted"
    assert live.client.get("/v1/status").json()["turns_queued"] == 0


def _today() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%d")


async def test_help_unknown_words_and_bad_ids_get_helpful_answers(harness, pipe) -> None:  # type: ignore[no-untyped-def]
    bob = Session(harness, pipe, "bob")
    assert (await bob.type("/memory"))[0].startswith("**Memory commands**")
    assert (await bob.type("/memory frobnicate"))[0] == (
        "I don't know the memory command `frobnicate`. Type `/memory help` to see the commands."
    )
    assert (await bob.type("/memory forget abc"))[0] == (
        "That didn't work: “abc” is not a memory id; ids are the codes shown by list."
    )
    assert (await bob.type("/memory forget zzzzzz"))[0] == (
        "That didn't work: there is no memory zzzzzz that this chat may see."
    )
    assert (await bob.type("/memory list nonsense"))[0].startswith("unknown bank")


async def test_another_users_id_cannot_be_touched(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    alice, mallory = Session(harness, pipe, "alice"), Session(harness, pipe, "mallory")
    code = _ids((await alice.type("/memory add My PIN hint is the cat's birthday"))[0])[0]
    for command in (
        f"/memory forget {code}",
        f"/memory edit {code} hacked",
        f"/memory assign_bank {code} interaction_patterns",
    ):
        answer, _ = await mallory.type(command)
        assert answer == f"That didn't work: there is no memory {code} that this chat may see."
    assert live.client.get("/v1/users/alice/memories").json()["total"] == 1


async def test_search_finds_the_bike_memory_first(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    """Case 22."""
    facts = [
        "User is vegetarian",
        "User owns a beagle",
        "User works nights",
        "User lives in Valencia",
        "User is learning the bassoon",
        "User's sister is Noor",
        "User prefers short answers",
        "User drinks oat milk",
        "User keeps two beehives",
        "User's favourite colour is teal",
        "User was born in 1988",
        "User hates cilantro",
        "User plays chess on Sundays",
        "User is allergic to shellfish",
        "User's partner is called Sam",
        "User studies Japanese",
        "User owns a sailboat",
        "User rides a cargo bike to work",
        "User's laptop is a ThinkPad",
        "User grows tomatoes",
    ]
    for fact in facts:
        live.client.post("/v1/users/carol/memories", json={"content": fact})
    answer, _ = await Session(harness, pipe, "carol").type("/memory search bike")
    lines = [line for line in answer.splitlines() if line.startswith("- ")]
    assert len(lines) in (1, 2, 3)
    assert lines[0].endswith("User rides a cargo bike to work")


async def test_forget_removes_a_memory_from_everything_the_next_turn_sees(
    harness,
    pipe,
    live,
    db_conn: psycopg.AsyncConnection,  # type: ignore[no-untyped-def]
) -> None:
    """Case 31."""
    dana = Session(harness, pipe, "dana")
    await dana.type("My spare key is under the blue flowerpot.")
    live.wait_for_extraction()
    listing, _ = await dana.type("/memory list")
    code = _ids(listing)[0]
    dana.new_chat()
    _, before = await dana.type("Where's my spare key?")
    assert "flowerpot" in json.dumps(before["messages"])
    assert (await dana.type(f"/memory forget {code.upper()}"))[0].startswith(f"Forgotten `{code}`")
    dana.new_chat()
    _, after = await dana.type("Where's my spare key?")
    assert "flowerpot" not in json.dumps(after["messages"])
    assert "flowerpot" not in (await dana.type("/memory export"))[0]
    assert "flowerpot" not in (await dana.type("/memory profile"))[0]
    assert "flowerpot" not in json.dumps(live.client.get("/v1/users/dana/memories/export").json())
    for table in ("memories", "memory_events", "turns", "injections"):
        row = await (
            await db_conn.execute(
                f"SELECT count(*) FROM {table} t WHERE t::text ILIKE '%flowerpot%'"
            )
        ).fetchone()
        assert row == (0,), table


async def test_forget_all_needs_the_code_and_leaves_other_users_alone(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    """Case 32."""
    a, b = Session(harness, pipe, "user-a"), Session(harness, pipe, "user-b")
    for i in range(3):
        await a.type(f"/memory add A-fact {i}: my locker is blue")
        await b.type(f"/memory add B-fact {i}: my bike is green")
    ask, _ = await a.type("/memory forget all")
    code = re.search(r"/memory forget all ([0-9a-f]{6})", ask).group(1)  # type: ignore[union-attr]
    wrong, _ = await a.type("/memory forget all 000000")
    assert wrong == (
        "`000000` is not the confirmation code (a code is only good until your memories "
        "change), so nothing was forgotten. " + ask
    )
    assert live.client.get("/v1/users/user-a/memories").json()["total"] == 3
    done, _ = await a.type(f"/memory forget all {code}")
    assert done == "Forgot all 3 memories. Project memories of shared folders were kept."
    assert live.client.get("/v1/users/user-a/memories").json()["total"] == 0
    assert live.client.get("/v1/users/user-b/memories").json()["total"] == 3
    hit, _ = await b.type("/memory search bike")
    assert "B\\-fact" in hit


async def test_why_shows_what_went_into_the_last_reply(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    erin = Session(harness, pipe, "erin")
    await erin.type("/memory add I drink oat milk in my coffee")
    await erin.type("What should I add to my coffee?")
    why, _ = await erin.type("/memory why")
    assert why.startswith("**Memories used for this chat's last reply**")
    assert "User drinks oat milk in their coffee — " in why
    assert ", confidence 1.00, added by hand" in why


async def test_why_is_about_this_chat_only(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    gus = Session(harness, pipe, "gus")
    await gus.type("/memory add I drink oat milk in my coffee")
    await gus.type("What should I add to my coffee?")
    gus.new_chat()
    why, _ = await gus.type("/memory why")
    assert why == "No memories went into a reply in this chat yet."


async def test_why_shows_core_profile_items_as_such_not_as_zero_scores(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    hal = Session(harness, pipe, "hal")
    await hal.type("/memory add I am vegetarian")
    await hal.type("Tell me about the history of Rome.")
    why, _ = await hal.type("/memory why")
    assert "similarity 0.00, score 0.00" not in why
    assert "User is vegetarian — core profile, sent with every message, confidence 1.00" in why


async def test_first_person_adds_are_stored_in_the_third_person(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    ivy = Session(harness, pipe, "ivy")
    added, _ = await ivy.type("/memory add I am allergic to penicillin")
    assert added.endswith(" · User is allergic to penicillin")
    assert [m["content"] for m in live.client.get("/v1/users/ivy/memories").json()["items"]] == [
        "User is allergic to penicillin"
    ]


async def test_one_memory_is_counted_in_the_singular(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    jo = Session(harness, pipe, "jo")
    await jo.type("/memory add I keep bees")
    banks, _ = await jo.type("/memory banks")
    assert "- **Personal**: 1 memory — read, write" in banks.splitlines()


async def test_help_lists_the_chat_bank(harness, pipe) -> None:  # type: ignore[no-untyped-def]
    help_text, _ = await Session(harness, pipe, "kim").type("/memory help")
    assert "banks: personal, interaction_patterns, project, chat" in " ".join(help_text.split())


async def test_shared_chats_never_list_or_add_personal_memories(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    frank = Session(harness, pipe, "frank")
    await frank.type("/memory add I am allergic to shellfish")
    frank.chat.chat_id = "channel:team"
    listing, _ = await frank.type("/memory list")
    assert "shellfish" not in listing
    assert listing.endswith("Personal memories are never shown in a shared chat.")
    refused, _ = await frank.type("/memory add personal: I like jazz")
    assert refused == ("That didn't work: Personal memories cannot be changed in a shared chat.")
    added, _ = await frank.type("/memory add I like answers as bullet points")
    assert added.startswith("Remembered in Interaction Patterns:")


async def test_pause_stops_learning_until_resume(harness, pipe, live, llm) -> None:  # type: ignore[no-untyped-def]
    gina = Session(harness, pipe, "gina")
    await gina.type("/memory pause")
    await gina.type("I drink oat milk.")
    assert live.client.get("/v1/status").json()["turns_queued"] == 0
    await gina.type("/memory resume")
    await gina.type("Honestly, I drink oat milk.")
    live.wait_for_extraction()
    assert [m["content"] for m in live.client.get("/v1/users/gina/memories").json()["items"]] == [
        "User drinks oat milk"
    ]


async def test_command_turns_are_hidden_from_the_model_later(harness, pipe) -> None:  # type: ignore[no-untyped-def]
    hana = Session(harness, pipe, "hana")
    await hana.type("/memory list")
    _, body = await hana.type("hello")
    assert [m["role"] for m in body["messages"] if m["role"] != "system"] == ["user"]
    assert body["messages"][-1]["content"] == "hello"


async def test_the_pipe_refuses_requests_that_did_not_come_through_the_filter(pipe) -> None:  # type: ignore[no-untyped-def]
    answer = await pipe.pipe({"messages": [{"role": "user", "content": "hi"}]}, __metadata__={})
    assert answer == "This model only answers /memory commands typed in a chat."


async def test_commands_fail_open_with_a_clear_line_when_the_service_is_down(
    harness, pipe, live
) -> None:  # type: ignore[no-untyped-def]
    live.stop()
    answer, _ = await Session(harness, pipe, "ivan").type("/memory list")
    assert answer.startswith("The memory service is not reachable right now")


async def test_paused_learning_shows_a_notice_on_the_next_turn(harness, pipe, live) -> None:  # type: ignore[no-untyped-def]
    lea = Session(harness, pipe, "lea")
    await lea.type("/memory pause")
    body, metadata, user_id, assistant_id = lea.chat.inlet_request("I keep bees.")
    await harness.inlet(lea.chat, body, metadata)
    out = await harness.outlet(
        lea.chat,
        lea.chat.record_turn(
            user_message_id=user_id, text="I keep bees.", assistant_id=assistant_id, reply="Nice!"
        ),
        metadata,
    )
    assert [e["data"]["description"] for e in out.events] == [
        "Memory is paused: nothing new is learned from this chat (/memory resume)"
    ]


async def test_a_mistyped_bank_prefix_is_answered_unknown_bank_and_nothing_is_saved(
    harness, pipe, live
) -> None:  # type: ignore[no-untyped-def]
    # issue 30 item 9c: `Projcet:` was saved to Personal without a word
    dana = Session(harness, pipe, "dana")
    answers = [
        (await dana.type(f"/memory add {text}"))[0]
        for text in ("Projcet: deadline is Friday", "personnal: I keep bees")
    ]
    listed = (await dana.type("/memory list personnal"))[0]

    assert answers == [
        "unknown bank 'Projcet'; use personal, interaction\\_patterns, project, chat or "
        "assistant. Nothing was saved.",
        "unknown bank 'personnal'; use personal, interaction\\_patterns, project, chat or "
        "assistant. Nothing was saved.",
    ]
    assert listed == answers[1].removesuffix(" Nothing was saved.")
    assert live.client.get("/v1/users/dana/memories").json()["total"] == 0
    # an ordinary word before a colon still starts a fact, and a real bank still picks one
    note = (await dana.type("/memory add Note: I like tea"))[0]
    personal = (await dana.type("/memory add personal: I keep bees"))[0]
    assert note.startswith("Remembered in Personal:") and note.endswith("Note: the user likes tea")
    assert personal.startswith("Remembered in Personal:") and personal.endswith("User keeps bees")
