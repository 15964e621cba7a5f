"""Reminders through the real filter file and the real service over HTTP, as Open WebUI calls
them: set in one chat, shown once on the day in another, listed through the commands pipe."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from bench.chat_harness import FilterHarness, HookCall, SavedChat, load_filter_instance
from testkit.filter_loader import load_filter
from testkit.live_service import LiveService

PIPE_PATH = load_filter.__defaults__[0].parent / "memory_commands.py"  # type: ignore[index]
TUESDAY_3PM_BERLIN = int(datetime(2026, 3, 10, 14, 0, tzinfo=UTC).timestamp())
FRIDAY_8AM_BERLIN = int(datetime(2026, 3, 13, 7, 0, tzinfo=UTC).timestamp())


@pytest.fixture
def harness(service: LiveService) -> FilterHarness:
    instance = load_filter_instance()
    instance.valves = instance.Valves(
        service_url=service.base_url,
        api_key=service.api_key,
        inlet_timeout_s=10,
        outlet_timeout_s=10,
        command_timeout_s=10,
    )
    return FilterHarness(instance)


def _user(harness: FilterHarness, user_id: str, zone: str | None) -> dict[str, Any]:
    user = harness.make_user(user_id=user_id, name=user_id.title())
    user["timezone"] = zone  # Open WebUI keeps the browser's zone on the account
    return user


async def _inlet(harness: FilterHarness, chat: SavedChat, text: str, **metadata: Any) -> HookCall:
    body, meta, _, _ = chat.inlet_request(text)
    meta.update(metadata)
    return await harness.inlet(chat, body, meta)


def _statuses(call: HookCall) -> list[str]:
    return [e["data"]["description"] for e in call.events if e.get("type") == "status"]


async def test_a_reminder_is_confirmed_then_shown_once_on_its_day(
    harness: FilterHarness,
    service: LiveService,
) -> None:
    ann = _user(harness, "ann", "Europe/Berlin")
    asking = SavedChat(user=ann, timestamp_s=TUESDAY_3PM_BERLIN)
    body, metadata, user_message_id, assistant_id = asking.inlet_request(
        "Remind me on Friday to call the vet."
    )
    asked = await harness.inlet(asking, body, metadata)
    [reminder] = service.client.get("/v1/users/ann/reminders").json()["items"]
    code = reminder["id"]
    assert (reminder["due_at"], reminder["timezone"]) == ("2026-03-12T23:00:00Z", "Europe/Berlin")
    assert (
        f"Reminder set by this message (confirm it in one short sentence): “call the vet”, "
        f"due on Fri 13 Mar 2026 (Europe/Berlin), id {code}."
    ) in asked.system_text
    assert _statuses(asked) == [f"Reminder set: call the vet — on Fri 13 Mar 2026 ({code})"]
    await harness.outlet(
        asking,
        asking.record_turn(
            user_message_id=user_message_id,
            text="Remind me on Friday to call the vet.",
            assistant_id=assistant_id,
            reply="Sure, on Friday.",
        ),
        metadata,
    )
    # regenerating the reply runs the inlet again for the same user message
    body, metadata, _, _ = asking.inlet_request("Remind me on Friday to call the vet.")
    metadata["user_message"]["id"] = metadata["user_message_id"] = user_message_id
    await harness.inlet(asking, body, metadata)
    assert service.client.get("/v1/users/ann/reminders").json()["total"] == 1

    bob = await _inlet(
        harness,
        SavedChat(user=_user(harness, "bob", "Europe/Berlin"), timestamp_s=FRIDAY_8AM_BERLIN),
        "Good morning!",
    )
    assert "call the vet" not in bob.system_text

    friday = SavedChat(user=ann, timestamp_s=FRIDAY_8AM_BERLIN)
    shown = await _inlet(harness, friday, "Good morning!")
    assert shown.system_text == (
        "Reminders (the user asked to be reminded of these now; remind them briefly before "
        "answering):\n- call the vet (asked on Tue 10 Mar 2026; due on Fri 13 Mar 2026)"
    )
    assert _statuses(shown) == ["Reminder: call the vet"]
    again = await _inlet(harness, friday, "What's the weather like?")
    assert again.system_text == ""

    pipe = load_filter(PIPE_PATH).Pipe()
    body, metadata, _, _ = friday.inlet_request("/memory reminders")
    routed = await harness.inlet(friday, body, metadata)
    listing = await pipe.pipe(routed.body, __user__=ann, __metadata__=metadata)
    assert listing == (
        "**Reminders** (0 pending, 1 done; times in Europe/Berlin):\n\n"
        f"- `{code}` done, shown on Fri 13 Mar 2026 at 08:00 · call the vet\n\n"
        "Cancel one with `/memory forget <id>`."
    )


async def test_concurrent_inlets_show_a_due_reminder_in_one_of_them(
    harness: FilterHarness,
    service: LiveService,
) -> None:
    cleo = _user(harness, "cleo", "UTC")
    created = service.client.post(
        "/v1/users/cleo/reminders",
        json={"content": "renew the passport", "due_at": "2026-03-13T06:00:00Z"},
    )
    assert created.status_code == 201
    chats = [SavedChat(user=cleo, timestamp_s=FRIDAY_8AM_BERLIN) for _ in range(3)]
    calls = await asyncio.gather(*(_inlet(harness, chat, "hello") for chat in chats))
    assert sorted(c.system_text.count("renew the passport") for c in calls) == [0, 0, 1]


async def test_a_topic_reminder_fires_when_the_topic_comes_up(
    harness: FilterHarness,
    service: LiveService,
) -> None:
    dev = _user(harness, "dev", None)
    chat = SavedChat(user=dev, timestamp_s=TUESDAY_3PM_BERLIN)
    asked = await _inlet(harness, chat, "Remind me when we talk about the garden to buy seeds")
    code = service.client.get("/v1/users/dev/reminders").json()["items"][0]["id"]
    assert _statuses(asked) == [f"Reminder set: buy seeds — when “the garden” comes up ({code})"]
    unrelated = await _inlet(harness, chat, "Can you help me write a cover letter?")
    assert unrelated.system_text == ""
    garden = await _inlet(
        harness,
        SavedChat(user=dev, timestamp_s=FRIDAY_8AM_BERLIN),
        "What should I plant in my garden this spring?",
    )
    assert (
        "- buy seeds (asked on Tue 10 Mar 2026; due when “the garden” comes up)"
        in garden.system_text
    )


async def test_the_browsers_zone_decides_what_tomorrow_means(
    harness: FilterHarness,
    service: LiveService,
) -> None:
    # 23:30 UTC on Tuesday is 08:30 on Wednesday in Tokyo, where the browser is
    late = int(datetime(2026, 3, 10, 23, 30, tzinfo=UTC).timestamp())
    eve = _user(harness, "eve", "Europe/Berlin")
    chat = SavedChat(user=eve, timestamp_s=late)
    asked = await _inlet(
        harness,
        chat,
        "remind me tomorrow to water the bonsai",
        variables={"{{CURRENT_TIMEZONE}}": "Asia/Tokyo"},
    )
    [reminder] = service.client.get("/v1/users/eve/reminders").json()["items"]
    assert (reminder["due_at"], reminder["timezone"]) == ("2026-03-11T15:00:00Z", "Asia/Tokyo")
    assert _statuses(asked)[0].startswith("Reminder set: water the bonsai — on Thu 12 Mar 2026")


async def test_a_temporary_chat_says_it_sets_no_reminder(
    harness: FilterHarness,
    service: LiveService,
) -> None:
    fox = _user(harness, "fox", "Europe/Berlin")
    chat = SavedChat(user=fox, timestamp_s=TUESDAY_3PM_BERLIN, chat_id="local:sid-1")
    asked = await _inlet(harness, chat, "remind me tomorrow to water the plants")
    assert _statuses(asked) == [
        "Reminder not set: a temporary chat saves nothing; ask again in a normal chat"
    ]
    assert "Reminder NOT set: a temporary chat saves nothing" in asked.system_text
    assert service.client.get("/v1/users/fox/reminders").json()["total"] == 0
