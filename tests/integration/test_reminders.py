"""Reminders against the real service: set from a message, fired once, owner only, cancelled.

Real PostgreSQL, the real embedding model and real HTTP; times are the turns' own (`now`),
never the wall clock.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import psycopg
import pytest

from service.core.reminders import Reminder, TriggerKind, reminder_code
from service.embeddings.encoder import Encoder
from service.storage import reminders
from service.storage.db import Database
from testkit.live_service import LiveService
from testkit.waiting import wait_until_async

TUESDAY = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)  # 15:00 in Berlin
FRIDAY_MORNING = datetime(2026, 3, 13, 7, 0, tzinfo=UTC)  # 08:00 in Berlin
_ids = itertools.count(1)


def _chat(
    user: str,
    *,
    kind: str = "saved",
    chat_id: str = "c-1",
    collaborative: bool = False,
    zone: str | None = "Europe/Berlin",
) -> dict[str, Any]:
    chat: dict[str, Any] = {
        "user_id": user,
        "kind": kind,
        "chat_id": chat_id,
        "collaborative": collaborative,
    }
    if collaborative:
        chat["collaborative_reason"] = "channel" if kind == "channel" else "folder_shared"
    if zone:
        chat["timezone"] = zone
    return chat


def _say(
    service: LiveService,
    user: str,
    message: str,
    now: datetime,
    *,
    message_id: str | None = None,
    **chat: Any,
) -> dict[str, Any]:
    """One inlet; returns the /v1/context answer."""
    answer = service.client.post(
        "/v1/context",
        json={
            "chat": _chat(user, **chat),
            "message": message,
            "now": now.isoformat(),
            "user_message_id": message_id or f"m-{next(_ids)}",
        },
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def _reminders(service: LiveService, user: str, **params: str) -> list[dict[str, Any]]:
    answer = service.client.get(f"/v1/users/{user}/reminders", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()["items"]


def _fired(answer: dict[str, Any]) -> list[str]:
    return [r["content"] for r in answer["reminders"]]


def _command(service: LiveService, user: str, command: str, **chat: Any) -> str:
    answer = service.client.post(
        "/v1/commands",
        json={"chat": _chat(user, **chat), "command": command, "now": FRIDAY_MORNING.isoformat()},
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["text"])


def test_remind_me_on_friday_is_set_confirmed_and_fires_on_friday(service: LiveService) -> None:
    asked = _say(service, "ann", "Remind me on Friday to call the vet", TUESDAY)
    [reminder] = _reminders(service, "ann")
    code = reminder["id"]
    assert {
        k: reminder[k]
        for k in (
            "content",
            "trigger",
            "due_at",
            "all_day",
            "timezone",
            "cue",
            "state",
            "fired_at",
            "source_chat_id",
        )
    } == {
        "content": "call the vet",
        "trigger": "time",
        "due_at": "2026-03-12T23:00:00Z",
        "all_day": True,
        "timezone": "Europe/Berlin",
        "cue": None,
        "state": "pending",
        "fired_at": None,
        "source_chat_id": "c-1",
    }
    assert asked["notice"] == f"Reminder set: call the vet — on Fri 13 Mar 2026 ({code})"
    assert asked["reminders"] == []
    assert asked["block"] == (
        "Reminder set by this message (confirm it in one short sentence): “call the vet”, due "
        f"on Fri 13 Mar 2026 (Europe/Berlin), id {code}. The user can see and cancel reminders "
        f"with /memory reminders and /memory forget {code}."
    )

    thursday_night = _say(
        service, "ann", "What's for dinner?", datetime(2026, 3, 12, 22, 59, tzinfo=UTC)
    )  # 23:59 in Berlin
    assert (thursday_night["reminders"], thursday_night["block"]) == ([], "")
    friday = _say(service, "ann", "Good morning!", FRIDAY_MORNING, chat_id="c-2")
    assert _fired(friday) == ["call the vet"]
    assert friday["notice"] == "Reminder: call the vet"
    assert friday["block"] == (
        "Reminders (the user asked to be reminded of these now; remind them briefly before "
        "answering):\n- call the vet (asked on Tue 10 Mar 2026; due on Fri 13 Mar 2026)"
    )
    later = _say(service, "ann", "And lunch?", FRIDAY_MORNING + timedelta(hours=4), chat_id="c-2")
    assert (later["reminders"], later["notice"], later["block"]) == ([], None, "")
    [done] = _reminders(service, "ann")
    assert (done["state"], done["fired_at"]) == ("fired", "2026-03-13T07:00:00Z")


async def test_a_due_reminder_fires_exactly_once_across_concurrent_inlets(
    service: LiveService,
) -> None:
    for i in range(5):
        created = service.client.post(
            "/v1/users/bo/reminders",
            json={"content": f"task {i}", "due_at": "2026-03-11T08:00:00Z"},
        )
        assert created.status_code == 201, created.text
    body = {"chat": _chat("bo"), "message": "hello", "now": "2026-03-11T09:00:00Z"}
    async with httpx.AsyncClient(
        base_url=service.base_url,
        timeout=30,
        headers={"Authorization": f"Bearer {service.api_key}"},
    ) as client:
        answers = await asyncio.gather(
            *(
                client.post("/v1/context", json={**body, "user_message_id": f"m{i}"})
                for i in range(4)
            )
        )
    fired = [r["content"] for a in answers for r in a.json()["reminders"]]
    assert sorted(fired) == [f"task {i}" for i in range(5)], "each once, none twice"
    assert [r["state"] for r in _reminders(service, "bo")] == ["fired"] * 5


async def test_two_transactions_cannot_both_fire_one_reminder(
    database_url: str,
    db_conn: psycopg.AsyncConnection,
) -> None:
    """The second UPDATE waits for the first's row lock, then finds the reminder fired."""
    db = Database.connect(database_url)
    due = datetime(2026, 3, 11, 8, 0, tzinfo=UTC)
    try:
        async with db.unit_of_work() as session:
            await reminders.insert(
                session,
                user_id="cy",
                content="water the plants",
                trigger=TriggerKind.TIME,
                due_at=due,
                all_day=False,
                timezone="UTC",
                cue=None,
                cue_vector=None,
                embedding_model=None,
                source_chat_id=None,
                source_key="k",
                created_at=due,
            )
        async with db.unit_of_work() as first:
            won = await reminders.fire(
                first,
                user_id="cy",
                now=due,
                query_vector=None,
                model="m",
                min_similarity=0.7,
                chat_id="a",
                except_key=None,
            )

            async def second() -> list[Reminder]:
                async with db.unit_of_work() as session:
                    return await reminders.fire(
                        session,
                        user_id="cy",
                        now=due,
                        query_vector=None,
                        model="m",
                        min_similarity=0.7,
                        chat_id="b",
                        except_key=None,
                    )

            waiting = asyncio.ensure_future(second())
            await _until_a_backend_waits_for_a_lock(db_conn)
            assert not waiting.done()
        assert [r.content for r in won] == ["water the plants"]
        assert await waiting == []
    finally:
        await db.dispose()


async def _until_a_backend_waits_for_a_lock(conn: psycopg.AsyncConnection) -> None:
    async def waiting() -> bool:
        row = await (
            await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        ).fetchone()
        return bool(row and row[0] >= 1)

    await wait_until_async(waiting, what="the second transaction to wait for the row lock")


def _similarity(encoder: Encoder, a: str, b: str) -> float:
    va, vb = encoder.encode_sync([a, b])
    return (1.0 + float(np.dot(va, vb))) / 2.0  # the project's 1 - cosine_distance / 2


def test_a_topic_reminder_fires_at_similarity_0_7_and_not_below(
    service: LiveService,
    encoder: Encoder,
) -> None:
    asked = _say(service, "di", "remind me when we talk about the garden to buy seeds", TUESDAY)
    [reminder] = _reminders(service, "di")
    assert (reminder["trigger"], reminder["cue"], reminder["content"]) == (
        "context",
        "the garden",
        "buy seeds",
    )
    assert (
        asked["notice"] == f"Reminder set: buy seeds — when “the garden” comes up "
        f"({reminder['id']})"
    )
    below = [
        "The tomatoes in the backyard are finally ripening",
        "Can you help me write a cover letter?",
        "What's the weather like tomorrow?",
    ]
    for message in below:
        assert _similarity(encoder, message, "the garden") < 0.7
        assert _fired(_say(service, "di", message, TUESDAY + timedelta(hours=1))) == []
    above = "What should I plant in my garden this spring?"
    assert _similarity(encoder, above, "the garden") >= 0.7
    fired = _say(service, "di", above, TUESDAY + timedelta(hours=2))
    assert _fired(fired) == ["buy seeds"]
    assert fired["block"].endswith(
        "- buy seeds (asked on Tue 10 Mar 2026; due when “the garden” comes up)"
    )
    again = _say(service, "di", "Let's talk about the garden", TUESDAY + timedelta(hours=3))
    assert _fired(again) == [], "fired once"


@pytest.mark.parametrize(("margin", "fires"), [(-0.002, True), (0.002, False)])
def test_the_topic_threshold_is_inclusive_and_configurable(
    service_factory,
    encoder: Encoder,
    margin: float,
    fires: bool,  # type: ignore[no-untyped-def]
) -> None:
    message = "I spent the morning weeding the vegetable beds and the roses."
    similarity = _similarity(encoder, message, "the garden")
    live = service_factory(MEMORY_REMINDER_SIMILARITY=str(round(similarity + margin, 4)))
    live.client.post("/v1/users/ed/reminders", json={"content": "buy seeds", "cue": "the garden"})
    assert _fired(_say(live, "ed", message, TUESDAY)) == (["buy seeds"] if fires else [])


def test_the_message_that_sets_a_reminder_never_fires_it_even_when_regenerated(
    service: LiveService,
) -> None:
    message = "remind me when we talk about the garden to buy seeds"
    first = _say(service, "fay", message, TUESDAY, message_id="u-1")
    regenerated = _say(service, "fay", message, TUESDAY + timedelta(minutes=1), message_id="u-1")
    assert len(_reminders(service, "fay")) == 1, "set once per message"
    assert (first["reminders"], regenerated["reminders"]) == ([], [])
    assert regenerated["notice"] == first["notice"]


def test_reminders_reach_only_the_user_who_asked(service: LiveService) -> None:
    _say(service, "gus", "remind me on Friday to call the vet", TUESDAY)
    _say(service, "gus", "remind me when we talk about the garden to buy seeds", TUESDAY)
    code = _reminders(service, "gus")[0]["id"]
    other = _say(service, "hal", "What should I plant in my garden this spring?", FRIDAY_MORNING)
    assert (other["reminders"], other["notice"], other["block"]) == ([], None, "")
    assert _reminders(service, "hal") == []
    assert service.client.get(f"/v1/users/hal/reminders/{code}").status_code == 404
    refused = service.client.delete(f"/v1/users/hal/reminders/{code}")
    assert (refused.status_code, refused.json()) == (
        404,
        {"detail": f"no reminder {code} for this user"},
    )
    assert (
        _command(service, "hal", f"/memory forget {code}")
        == (  # Markdown-escaped "-"
            f"That didn't work: there is no reminder r\\-{code[2:]} that this chat may see."
        )
    )
    assert [r["state"] for r in _reminders(service, "gus")] == ["pending", "pending"]
    mine = _say(service, "gus", "What should I plant in my garden this spring?", FRIDAY_MORNING)
    assert sorted(_fired(mine)) == ["buy seeds", "call the vet"]


@pytest.mark.parametrize(
    ("chat", "reason"),
    [
        (
            {"kind": "temporary", "chat_id": "local:abc"},
            "a temporary chat saves nothing; ask again in a normal chat",
        ),
        (
            {"kind": "saved", "collaborative": True},
            "reminders are personal, so they are only set in your own private chats",
        ),
        (
            {"kind": "channel", "chat_id": "channel:team", "collaborative": True},
            "reminders are personal, so they are only set in your own private chats",
        ),
    ],
)
def test_temporary_and_shared_chats_neither_set_nor_show_reminders(
    service: LiveService,
    chat: dict[str, Any],
    reason: str,
) -> None:
    _say(service, "ida", "remind me on Friday to call the vet", TUESDAY)
    asked = _say(service, "ida", "remind me tomorrow to water the plants", TUESDAY, **chat)
    assert asked["notice"] == f"Reminder not set: {reason}"
    assert asked["block"].startswith(f"Reminder NOT set: {reason}.")
    due = _say(service, "ida", "Good morning!", FRIDAY_MORNING, **chat)
    assert (due["reminders"], due["notice"]) == ([], None)
    assert "call the vet" not in due["block"]
    assert [r["content"] for r in _reminders(service, "ida")] == ["call the vet"]
    assert _fired(_say(service, "ida", "Good morning!", FRIDAY_MORNING)) == ["call the vet"]


def test_a_cancelled_reminder_never_fires_and_is_not_set_again(service: LiveService) -> None:
    _say(service, "jo", "remind me on Friday to call the vet", TUESDAY, message_id="u-7")
    code = _reminders(service, "jo")[0]["id"]
    assert _command(service, "jo", f"/memory forget {code.upper()}") == (
        f"Cancelled reminder `{code}`: on Fri 13 Mar 2026 · call the vet"
    )
    assert _command(service, "jo", f"/memory forget {code}") == (
        f"That didn't work: there is no reminder r\\-{code[2:]} that this chat may see."
    )
    regenerated = _say(
        service, "jo", "remind me on Friday to call the vet", TUESDAY, message_id="u-7"
    )
    assert (regenerated["notice"], regenerated["block"]) == (None, "")
    assert _fired(_say(service, "jo", "Good morning!", FRIDAY_MORNING)) == []
    assert _reminders(service, "jo") == []


async def test_cancelling_removes_the_text_and_keeps_a_tombstone(
    service: LiveService,
    db_conn: psycopg.AsyncConnection,
) -> None:
    _say(
        service, "kim", "remind me when my divorce lawyer comes up to ask about the house", TUESDAY
    )
    code = _reminders(service, "kim")[0]["id"]
    assert service.client.delete(f"/v1/users/kim/reminders/{code}").status_code == 204
    row = await (
        await db_conn.execute(
            "SELECT content, cue, cue_embedding IS NULL, cancelled_at IS NOT NULL FROM reminders "
            "WHERE user_id = 'kim'"
        )
    ).fetchone()
    assert row == ("", None, True, True)
    leftovers = await (
        await db_conn.execute("SELECT count(*) FROM reminders r WHERE r::text ILIKE '%lawyer%'")
    ).fetchone()
    assert leftovers == (0,)


def test_a_request_without_a_time_is_answered_not_dropped(service: LiveService) -> None:
    asked = _say(service, "lee", "Can you remind me to call the vet?", TUESDAY)
    reason = (
        "I could not tell when to remind you: give a time (“on Friday at 9”, “in 2 "
        "hours”) or a topic (“when we talk about the garden”)"
    )
    assert asked["notice"] == f"Reminder not set: {reason}"
    assert asked["block"] == (
        f"Reminder NOT set: {reason}. Tell the user so in one short "
        "sentence and ask for what is missing; do not claim it was set."
    )
    assert _reminders(service, "lee") == []


def test_the_reminders_command_lists_in_the_users_zone(service: LiveService) -> None:
    _say(service, "max", "remind me on Friday at 18:30 to stretch", TUESDAY)
    _say(service, "max", "remind me when we talk about Lisbon to book a hotel", TUESDAY)
    _say(service, "max", "remind me in an hour to take the cake out", TUESDAY)
    _say(service, "max", "hello", TUESDAY + timedelta(hours=2))  # the cake reminder fires
    codes = {r["content"]: r["id"] for r in _reminders(service, "max")}
    assert _command(service, "max", "/memory reminders", zone="America/New_York") == (
        "**Reminders** (2 pending, 1 done; times in America/New_York):\n\n"
        f"- `{codes['stretch']}` on Fri 13 Mar 2026 at 13:30 · stretch\n"
        f"- `{codes['book a hotel']}` when “Lisbon” comes up · book a hotel\n"
        f"- `{codes['take the cake out']}` done, shown on Tue 10 Mar 2026 at 12:00 · take the "
        "cake out\n\nCancel one with `/memory forget <id>`."
    )
    shared = _command(
        service, "max", "/memory reminders", kind="channel", chat_id="channel:x", collaborative=True
    )
    assert shared == "Reminders are personal and never shown in a shared chat."
    assert "`/memory reminders`" in _command(service, "max", "/memory help")
    exported = _command(service, "max", "/memory export")
    assert "**Your reminders** (3) as JSON" in exported
    assert f'"id": "{codes["stretch"]}"' in exported


def test_forget_all_also_cancels_reminders(service: LiveService) -> None:
    service.client.post("/v1/users/ned/memories", json={"content": "Ned keeps bees"})
    _say(service, "ned", "remind me on Friday to call the vet", TUESDAY)
    ask = _command(service, "ned", "/memory forget all")
    assert ask.startswith(
        "This forgets your only Personal or Interaction Patterns memory and your 1 reminder, "
        "for good."
    )
    code = ask.rsplit(" ", 1)[1].strip("`")
    assert _command(service, "ned", f"/memory forget all {code}") == (
        "Forgot 1 memory and 1 reminder. Project memories of shared folders were kept."
    )
    assert _reminders(service, "ned") == []


def test_the_reminders_api_validates_with_sentences(service: LiveService) -> None:
    both = service.client.post(
        "/v1/users/oz/reminders",
        json={"content": "x", "due_at": "2026-03-11T08:00:00Z", "cue": "garden"},
    )
    assert (both.status_code, both.json()) == (
        400,
        {"detail": "give either due_at (a time) or cue (a topic), not both or neither"},
    )
    neither = service.client.post("/v1/users/oz/reminders", json={"content": "x"})
    assert neither.status_code == 400
    zone = service.client.post(
        "/v1/users/oz/reminders", json={"content": "x", "cue": "garden", "timezone": "Mars/Base"}
    )
    assert (zone.status_code, zone.json()) == (
        400,
        {"detail": "unknown time zone 'Mars/Base'; use an IANA name such as Europe/Berlin"},
    )
    empty = service.client.post("/v1/users/oz/reminders", json={"content": "", "cue": "x"})
    assert (empty.status_code, empty.json()) == (
        422,
        {"detail": "content: String should have at least 1 character"},
    )
    assert service.client.get("/v1/users/oz/reminders/k7m2qa").status_code == 404
    bad_state = service.client.get("/v1/users/oz/reminders", params={"state": "cancelled"})
    assert bad_state.status_code == 422
    made = service.client.post(
        "/v1/users/oz/reminders",
        json={
            "content": "call the vet",
            "due_at": "2026-03-11T08:00:00Z",
            "timezone": "Asia/Tokyo",
        },
    )
    assert made.status_code == 201
    got = service.client.get(f"/v1/users/oz/reminders/{made.json()['id']}").json()
    assert (got["content"], got["timezone"], got["due_at"]) == (
        "call the vet",
        "Asia/Tokyo",
        "2026-03-11T08:00:00Z",
    )
    assert _reminders(service, "oz", state="pending") == [got]
    assert _reminders(service, "oz", state="fired") == []


async def test_topic_cues_of_another_embedding_model_are_embedded_again(
    service: LiveService,
    db_conn: psycopg.AsyncConnection,
) -> None:
    service.client.post(
        "/v1/users/pat/reminders", json={"content": "buy seeds", "cue": "the garden"}
    )
    await db_conn.execute(
        "UPDATE reminders SET cue_embedding = NULL, embedding_model = 'an-older-model'"
    )
    fired = _say(service, "pat", "What should I plant in my garden this spring?", TUESDAY)
    assert _fired(fired) == ["buy seeds"]


def test_reminder_ids_never_collide_with_memory_ids(service: LiveService) -> None:
    memory = service.client.post("/v1/users/quinn/memories", json={"content": "Quinn rows"})
    assert memory.status_code == 201
    _say(service, "quinn", "remind me on Friday to call the vet", TUESDAY)
    [reminder] = _reminders(service, "quinn")
    assert reminder["id"] == reminder_code(1)
    listing = _command(service, "quinn", "/memory list")
    memory_code = listing.split("`")[1]
    assert memory_code == reminder["id"][2:], "both are the first row of their table"
    assert _command(service, "quinn", f"/memory forget {reminder['id']}").startswith(
        "Cancelled reminder"
    )
    assert service.client.get("/v1/users/quinn/memories").json()["total"] == 1


async def test_secrets_in_a_reminder_are_never_stored(
    service: LiveService,
    db_conn: psycopg.AsyncConnection,
) -> None:
    _say(
        service, "ray", "remind me tomorrow at 9:00 that the wifi password is Tr0ub4dor&3", TUESDAY
    )
    [reminder] = _reminders(service, "ray")
    assert reminder["content"] == "the wifi password is [redacted password]"
    row = await (
        await db_conn.execute("SELECT count(*) FROM reminders r WHERE r::text LIKE '%Tr0ub4dor%'")
    ).fetchone()
    assert row == (0,)
