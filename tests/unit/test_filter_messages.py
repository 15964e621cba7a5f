"""What the filter tells whom: typos, failed commands, both status lines, admin-only notices."""

from typing import Any

import pytest

from testkit.filter_loader import load_filter
from tests.support.emitter import EventRecorder
from tests.support.memory_stub import TEST_TIMEOUT_S, MemoryServiceStub, StubReply, closed_port_url

CHAT_ID = "7f0c2d4e-0000-4000-8000-000000000002"
ALICE = {"id": "u-alice", "name": "Alice", "role": "user"}
ADMIN = {"id": "u-admin", "name": "Ada", "role": "admin"}

#: mistyped command words: one edit or one swap away from /memory or /memories
TYPOS = [
    "/memroy list",
    "/memorys",
    "/memry list",
    "/mmeory list",
    "/memeory search bees",
    "/memoery",
    "/meomry list",
    "/meory list",
    "/emory list",
    "/menory list",
    "/memoires",
    "/memries list",
    "/memores",
    "/memorie list",
    "/Memroy list",
    "/memoyr list",
    "/memori list",
    "//memory list",
]
#: look-alikes that are not memory commands: they go to the model as typed
LOOK_ALIKES = [
    "/memo write a memo",
    "/memoir",
    "/member list",
    "/models",
    "/mermaid graph",
    "/memes",
    "/merry christmas",
    "/remember this",
    "/help",
    "/memento",
    "/mercury",
    "/memorial day plans",
    "/me waves",
    "memroy list",
    "I wrote /memroy by mistake",
    "/ memory list",
]


def _filter(module: Any, url: str) -> Any:
    instance = module.Filter()
    # the stub gets TEST_TIMEOUT_S, not the 0.8 s valve: a busy machine must not turn an
    # answer into "unavailable" (the valves' own timing is tested in test_fail_open)
    instance.valves = module.Filter.Valves(
        service_url=url,
        api_key="key-1",
        inlet_timeout_s=TEST_TIMEOUT_S,
        outlet_timeout_s=TEST_TIMEOUT_S,
    )
    return instance


def _body(text: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


async def _inlet(instance: Any, text: str, user: dict[str, Any] = ALICE, emitter: Any = None):
    return await instance.inlet(
        _body(text),
        __user__=user,
        __metadata__={"chat_id": CHAT_ID, "user_id": user["id"]},
        __event_emitter__=emitter,
        __chat_id__=CHAT_ID,
    )


def _outlet_body(text: str) -> dict[str, Any]:
    return {
        "model": "m",
        "chat_id": CHAT_ID,
        "id": "a-1",
        "messages": [
            {"id": "u-1", "role": "user", "content": text, "timestamp": 1683554000},
            {"id": "a-1", "role": "assistant", "content": "Hi!", "timestamp": 1683554001},
        ],
    }


@pytest.mark.parametrize("typed", TYPOS)
async def test_a_mistyped_memory_command_gets_a_hint_without_the_model_or_the_service(typed):
    module = load_filter()
    metadata: dict[str, Any] = {"chat_id": CHAT_ID, "user_id": ALICE["id"]}
    with MemoryServiceStub() as stub:
        instance = _filter(module, stub.url)
        body = await instance.inlet(
            _body(typed), __user__=ALICE, __metadata__=metadata, __chat_id__=CHAT_ID
        )
        await instance.outlet(_outlet_body(typed), __user__=ALICE)

    assert body["model"] == "memory_commands"
    assert metadata["memory_command"]["text"].startswith("Did you mean `/memory ")
    assert stub.requests == [], "neither the service nor extraction sees a typo"


@pytest.mark.parametrize("typed", LOOK_ALIKES)
async def test_look_alikes_of_the_command_go_to_the_model(typed):
    module = load_filter()
    assert module.command_typo_hint(typed) is None


def test_typo_corpus_counts():
    module = load_filter()
    hinted = [t for t in TYPOS + LOOK_ALIKES if module.command_typo_hint(t) is not None]
    assert (len(TYPOS), len(LOOK_ALIKES), len(hinted)) == (18, 16, 18)
    assert set(hinted) == set(TYPOS)
    assert module.command_typo_hint("/memroy list") == (
        "Did you mean `/memory list`? Memory commands start with `/memory`; "
        "`/memory help` lists them. Nothing was sent to the model."
    )


async def _command_answer(instance: Any, user: dict[str, Any]) -> str:
    metadata: dict[str, Any] = {"chat_id": CHAT_ID, "user_id": user["id"]}
    await instance.inlet(
        _body("/memory list"), __user__=user, __metadata__=metadata, __chat_id__=CHAT_ID
    )
    text: str = metadata["memory_command"]["text"]
    return text


@pytest.mark.parametrize("who", ["user", "admin"])
async def test_a_command_with_a_wrong_key_says_to_tell_the_admin_not_to_retry(who):
    module = load_filter()
    user = ADMIN if who == "admin" else ALICE
    with MemoryServiceStub(lambda r: StubReply(status=401, json={"detail": "no"})) as stub:
        answer = await _command_answer(_filter(module, stub.url), user)

    told = (
        "Memory is not set up correctly, so this /memory command did not run. Trying again "
        "will not help: please tell your admin."
    )
    if who == "user":
        assert answer == told
    else:
        assert answer == (
            f"{told}\n\nFor the admin: the memory service at {stub.url} refused the api_key "
            "valve (HTTP 401): set it to the service's key (`python -m service api-key` prints it)"
        )


async def test_a_command_while_the_service_is_down_says_to_try_again():
    module = load_filter()
    answer = await _command_answer(_filter(module, closed_port_url()), ALICE)
    assert answer == (
        "The memory service is not reachable right now, so this /memory command did not run. "
        "Please try again in a moment."
    )


async def test_when_the_service_fails_both_status_lines_stay_visible_in_the_last_one():
    module = load_filter()
    instance = _filter(module, closed_port_url())
    inlet_events, outlet_events = EventRecorder(), EventRecorder()

    await _inlet(instance, "Hello", emitter=inlet_events)
    await instance.outlet(_outlet_body("Hello"), __user__=ALICE, __event_emitter__=outlet_events)

    shown = [e["data"]["description"] for e in inlet_events.events + outlet_events.events]
    assert shown == [
        "Memory unavailable — answering without it",
        "Memory unavailable — answering without it · Memory could not save this turn",
    ]


def _turns_answer(request: Any) -> StubReply:
    if request.path == "/v1/turns":
        return StubReply(
            status=202,
            json={
                "status": "queued",
                "detail": "x",
                "notice": None,
                "admin_notice": "Memory (admins only): no LLM",
            },
        )
    return StubReply(json={"block": "", "memories": []})


@pytest.mark.parametrize("who", ["user", "admin"])
async def test_admin_notices_reach_admins_only(who):
    module = load_filter()
    user = ADMIN if who == "admin" else ALICE
    emitter = EventRecorder()
    with MemoryServiceStub(_turns_answer) as stub:
        await _filter(module, stub.url).outlet(
            _outlet_body("I keep bees"), __user__=user, __event_emitter__=emitter
        )

    shown = [e["data"]["description"] for e in emitter.events]
    assert shown == {"user": [], "admin": ["Memory (admins only): no LLM"]}[who]


def test_the_api_key_valve_is_a_password_field():
    module = load_filter()
    schema = module.Filter.Valves.model_json_schema()["properties"]
    assert schema["api_key"]["input"] == {"type": "password"}
    assert "input" not in schema["service_url"]


def test_the_filter_version_constant_matches_its_frontmatter():
    module = load_filter()
    source = open(module.__file__, encoding="utf-8").read()
    assert f"\nversion: {module.FILTER_VERSION}\n" in source


def _day_metadata(user: dict[str, Any], timestamp: float) -> dict[str, Any]:
    """Open WebUI's metadata of a turn whose user message the browser stamped `timestamp`."""
    return {
        "chat_id": CHAT_ID,
        "user_id": user["id"],
        "user_message": {"id": "u-1", "role": "user", "content": "x", "timestamp": timestamp},
    }


async def test_a_user_is_told_of_a_misconfiguration_again_on_the_next_day_of_their_messages():
    # The day is the one the user's message was sent on (Open WebUI passes the browser's
    # stamp), so the line comes back the next day even while the server's clock says today.
    module = load_filter()
    user = {**ALICE, "id": "u-next-day"}
    day, hour = 1_767_225_600, 3600  # 2026-01-01T00:00:00Z
    shown = []
    with MemoryServiceStub(lambda request: StubReply(status=401, json={"detail": "no"})) as stub:
        instance = _filter(module, stub.url)
        for sent in (day + 10 * hour, day + 18 * hour, day + 33 * hour, day + 40 * hour):
            events = EventRecorder()
            await instance.inlet(
                _body("Hello"),
                __user__=user,
                __metadata__=_day_metadata(user, sent),
                __event_emitter__=events,
                __chat_id__=CHAT_ID,
            )
            shown.append([e["data"]["description"] for e in events.events])

    line = module.STATUS_MISCONFIGURED
    assert shown == [[line], [], [line], []]


async def test_after_the_daily_line_a_misconfigured_turn_shows_no_status_at_all():
    module = load_filter()
    user = {**ALICE, "id": "u-quiet-turns"}
    seen = []
    with MemoryServiceStub(lambda request: StubReply(status=401, json={"detail": "no"})) as stub:
        instance = _filter(module, stub.url)
        for _ in range(2):
            inlet_events, outlet_events = EventRecorder(), EventRecorder()
            await _inlet(instance, "Hello", user=user, emitter=inlet_events)
            await instance.outlet(
                _outlet_body("Hello"), __user__=user, __event_emitter__=outlet_events
            )
            seen.append(
                [e["data"]["description"] for e in inlet_events.events + outlet_events.events]
            )

    # told once, in words that say what is wrong; the outlet does not store it again
    line = module.STATUS_MISCONFIGURED
    assert line == (
        "Memory is not set up correctly, so I am answering without it — please tell your admin"
    )
    assert seen == [[line], []]


async def test_an_admin_sees_the_cause_once_when_inlet_and_outlet_fail_alike():
    module = load_filter()
    emitted = []
    with MemoryServiceStub(lambda request: StubReply(status=401, json={"detail": "no"})) as stub:
        instance = _filter(module, stub.url)
        for _ in range(2):
            inlet_events, outlet_events = EventRecorder(), EventRecorder()
            await _inlet(instance, "Hello", user=ADMIN, emitter=inlet_events)
            await instance.outlet(
                _outlet_body("Hello"), __user__=ADMIN, __event_emitter__=outlet_events
            )
            emitted.append(
                [e["data"]["description"] for e in inlet_events.events + outlet_events.events]
            )

    line = (
        f"Memory misconfigured — the memory service at {stub.url} refused the api_key valve "
        "(HTTP 401): set it to the service's key (`python -m service api-key` prints it)"
    )
    assert emitted == [[line], [line]]  # once per turn (issue 30 item 5)
