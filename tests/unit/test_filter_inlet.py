"""Inlet: what is sent to the memory service, how the block is injected, and failing open."""

import asyncio
import copy
import time

import pytest

from testkit.filter_loader import load_filter
from testkit.waiting import LoopLag
from tests.support.emitter import EventRecorder, status
from tests.support.memory_stub import (
    TEST_TIMEOUT_S,
    MemoryServiceStub,
    StubReply,
    closed_port_url,
    default_responder,
)

CHAT_ID = "7f0c2d4e-0000-4000-8000-000000000001"
BLOCK = "<userMemories>Alice likes tea.</userMemories>"
ALICE = {"id": "u-123", "name": "Alice", "role": "user"}
UNAVAILABLE = "Memory unavailable — answering without it"
MISCONFIGURED = (
    "Memory is not set up correctly, so I am answering without it — please tell your admin"
)


def _filter(module, url: str, **valves):
    memory_filter = module.Filter()
    # the stub gets TEST_TIMEOUT_S unless a test sets a valve: a busy machine must not turn an
    # answer into "unavailable" (the valves' own timing is tested in test_fail_open)
    patient = {"inlet_timeout_s": TEST_TIMEOUT_S, "outlet_timeout_s": TEST_TIMEOUT_S}
    memory_filter.valves = module.Filter.Valves(
        service_url=url, api_key="key-1", **{**patient, **valves}
    )
    return memory_filter


def _body(*messages: dict) -> dict:
    return {
        "model": "m",
        "stream": True,
        "messages": list(messages)
        or [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Which drink do I like?"},
        ],
    }


def _metadata(chat_id: str = CHAT_ID, **extra) -> dict:
    return {"chat_id": chat_id, "session_id": "sid-1", "user_id": ALICE["id"], **extra}


async def _inlet(memory_filter, body, *, chat_id=CHAT_ID, metadata=None, user=ALICE, emitter=None):
    return await memory_filter.inlet(
        body,
        __user__=user,
        __metadata__=metadata if metadata is not None else _metadata(chat_id),
        __event_emitter__=emitter,
        __chat_id__=chat_id,
        __message_id__="a-1",
    )


async def test_sends_the_contract_request_for_a_saved_chat():
    module = load_filter()
    with MemoryServiceStub() as stub:
        metadata = _metadata(
            folder_id="f-1",
            user_message={"id": "u-1", "role": "user", "content": "x", "timestamp": 1683554160},
        )
        await _inlet(_filter(module, stub.url), _body(), metadata=metadata)

    assert stub.paths() == ["/v1/context"]
    request = stub.requests[0]
    assert request.headers["authorization"] == "Bearer key-1"
    assert request.body == {
        "chat": {
            "user_id": "u-123",
            "user_name": "Alice",
            "chat_id": CHAT_ID,
            "kind": "saved",
            "folder_id": "f-1",
            "collaborative": False,
            "collaborative_reason": None,
            "read_in_temporary": True,
        },
        "message": "Which drink do I like?",
        "budget_tokens": 400,
        "now": "2023-05-08T13:56:00Z",
        "user_message_id": "u-1",
    }


@pytest.mark.parametrize(
    ("user_zone", "variables", "sent"),
    [
        ("Europe/Berlin", {"{{CURRENT_TIMEZONE}}": "Asia/Tokyo"}, "Asia/Tokyo"),
        ("Europe/Berlin", {}, "Europe/Berlin"),
        (None, {"{{CURRENT_TIMEZONE}}": "America/New_York"}, "America/New_York"),
        (None, {"{{CURRENT_TIMEZONE}}": 3}, None),
        ("x" * 65, {}, None),
    ],
)
async def test_the_senders_time_zone_goes_with_the_chat(user_zone, variables, sent):
    """The request's browser zone first, else the account's (reminders are read in it)."""
    module = load_filter()
    user = {**ALICE, "timezone": user_zone}
    with MemoryServiceStub() as stub:
        await _inlet(
            _filter(module, stub.url), _body(), user=user, metadata=_metadata(variables=variables)
        )
    assert stub.requests[0].body["chat"].get("timezone") == sent


async def test_a_reminder_notice_is_shown_as_a_status_line():
    module = load_filter()
    emitter = EventRecorder()
    answer = {
        "block": "Reminders (…):\n- call the vet",
        "memories": [],
        "profile": None,
        "status": "no relevant memories",
        "notice": "Reminder: call the vet",
    }
    with MemoryServiceStub(responder=lambda request: StubReply(json=answer)) as stub:
        result = await _inlet(_filter(module, stub.url), _body(), emitter=emitter)
    assert result["messages"][0]["content"] == "You are helpful.\n\n" + answer["block"]
    assert emitter.events == [status("Reminder: call the vet")]


async def test_millisecond_timestamps_become_the_same_time():
    module = load_filter()
    with MemoryServiceStub() as stub:
        metadata = _metadata(user_message={"timestamp": 1683554160123})
        await _inlet(_filter(module, stub.url, budget_tokens=250), _body(), metadata=metadata)

    assert stub.requests[0].body["now"] == "2023-05-08T13:56:00Z"
    assert stub.requests[0].body["budget_tokens"] == 250


async def test_now_is_left_out_without_a_timestamp():
    module = load_filter()
    with MemoryServiceStub() as stub:
        await _inlet(_filter(module, stub.url), _body())

    assert "now" not in stub.requests[0].body


async def test_no_key_means_no_authorization_header():
    module = load_filter()
    with MemoryServiceStub() as stub:
        memory_filter = module.Filter()
        memory_filter.valves = module.Filter.Valves(service_url=stub.url + "/")
        await _inlet(memory_filter, _body())

    assert stub.paths() == ["/v1/context"]
    assert "authorization" not in stub.requests[0].headers


async def test_block_is_appended_to_the_existing_system_message():
    module = load_filter()
    emitter = EventRecorder()
    with MemoryServiceStub() as stub:
        body = _body()
        result = await _inlet(_filter(module, stub.url), body, emitter=emitter)

    assert result is body
    assert result["messages"] == [
        {"role": "system", "content": "You are helpful.\n\n" + BLOCK},
        {"role": "user", "content": "Which drink do I like?"},
    ]
    assert result["features"] == {"memory": False}
    assert emitter.events == [status("Recalled 2 memories")]


async def test_block_is_added_as_a_text_part_to_a_multi_part_system_message():
    module = load_filter()
    with MemoryServiceStub() as stub:
        body = _body(
            {"role": "system", "content": [{"type": "text", "text": "You are helpful."}]},
            {"role": "user", "content": "Which drink do I like?"},
        )
        result = await _inlet(_filter(module, stub.url), body)

    assert result["messages"][0] == {
        "role": "system",
        "content": [
            {"type": "text", "text": "You are helpful."},
            {"type": "text", "text": BLOCK},
        ],
    }


async def test_a_system_message_is_inserted_first_when_there_is_none():
    module = load_filter()
    with MemoryServiceStub() as stub:
        body = _body(
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Which drink do I like?"},
        )
        result = await _inlet(_filter(module, stub.url), body)

    assert result["messages"] == [
        {"role": "system", "content": BLOCK},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Which drink do I like?"},
    ]
    assert stub.requests[0].body["message"] == "Which drink do I like?"


async def test_only_text_parts_of_the_last_user_message_are_sent():
    module = load_filter()
    image = "data:image/png;base64," + "iVBORw0KGgo" * 50
    with MemoryServiceStub() as stub:
        body = _body(
            {"role": "user", "content": "an older question"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": image}},
                    {"type": "text", "text": "Be brief."},
                ],
            },
        )
        body["files"] = [{"type": "file", "id": "file-1", "name": "notes.pdf"}]
        await _inlet(_filter(module, stub.url), body)

    request = stub.requests[0]
    assert request.body["message"] == "What is in this picture?\nBe brief."
    assert b"base64" not in request.raw_body
    assert b"notes.pdf" not in request.raw_body


async def test_an_empty_block_leaves_the_messages_alone():
    module = load_filter()
    emitter = EventRecorder()

    def nothing(request):
        return StubReply(json={"block": "", "memories": [], "profile": None, "status": "none"})

    with MemoryServiceStub(nothing) as stub:
        body = _body()
        messages_before = copy.deepcopy(body["messages"])
        result = await _inlet(_filter(module, stub.url), body, emitter=emitter)

    assert result["messages"] == messages_before
    assert result["features"] == {"memory": False}
    assert emitter.events == []


@pytest.mark.parametrize(
    ("memories", "description"),
    [
        ([{"id": "m-1"}], "Recalled 1 memory"),
        ([], "Recalled what I know about you"),
    ],
)
async def test_status_line_counts_the_memories(memories, description):
    module = load_filter()
    emitter = EventRecorder()

    def answer(request):
        return StubReply(json={"block": BLOCK, "memories": memories, "profile": "p", "status": "s"})

    with MemoryServiceStub(answer) as stub:
        await _inlet(_filter(module, stub.url), _body(), emitter=emitter)

    assert emitter.events == [status(description)]


async def test_show_status_off_emits_nothing():
    module = load_filter()
    emitter = EventRecorder()
    user = {**ALICE, "valves": module.Filter.UserValves(show_status=False)}
    with MemoryServiceStub() as stub:
        body = _body()
        await _inlet(_filter(module, stub.url), body, user=user, emitter=emitter)
    await _inlet(_filter(module, closed_port_url()), _body(), user=user, emitter=emitter)

    assert body["messages"][0]["content"] == "You are helpful.\n\n" + BLOCK
    assert emitter.events == []


async def test_user_valves_given_as_a_dict_are_honoured():
    module = load_filter()
    emitter = EventRecorder()
    user = {**ALICE, "valves": {"show_status": False}}
    with MemoryServiceStub() as stub:
        await _inlet(_filter(module, stub.url), _body(), user=user, emitter=emitter)

    assert stub.paths() == ["/v1/context"]
    assert emitter.events == []


async def test_native_memory_stays_on_when_the_valve_says_so():
    module = load_filter()
    with MemoryServiceStub() as stub:
        body = _body()
        result = await _inlet(_filter(module, stub.url, disable_native_memory=False), body)

    assert "features" not in result
    assert result["messages"][0]["content"] == "You are helpful.\n\n" + BLOCK


async def test_native_memory_is_switched_off_next_to_other_features():
    module = load_filter()
    with MemoryServiceStub() as stub:
        body = _body()
        body["features"] = {"web_search": True, "memory": True}
        result = await _inlet(_filter(module, stub.url), body)

    assert result["features"] == {"web_search": True, "memory": False}


async def test_temporary_chat_reads_with_the_folder_from_metadata():
    module = load_filter()
    with MemoryServiceStub() as stub:
        metadata = _metadata("temporary:sid-1", folder_id="f-9")
        body = _body()
        result = await _inlet(
            _filter(module, stub.url), body, chat_id="temporary:sid-1", metadata=metadata
        )

    assert stub.requests[0].body["chat"] == {
        "user_id": "u-123",
        "user_name": "Alice",
        "chat_id": "temporary:sid-1",
        "kind": "temporary",
        "folder_id": "f-9",
        "collaborative": False,
        "collaborative_reason": None,
        "read_in_temporary": True,
    }
    assert result["messages"][0]["content"] == "You are helpful.\n\n" + BLOCK


async def test_temporary_chat_does_not_read_when_the_admin_forbids_it():
    module = load_filter()
    emitter = EventRecorder()
    with MemoryServiceStub() as stub:
        body = _body()
        messages_before = copy.deepcopy(body["messages"])
        result = await _inlet(
            _filter(module, stub.url, read_in_temporary_chats=False),
            body,
            chat_id="temporary:sid-1",
            metadata=_metadata("temporary:sid-1"),
            emitter=emitter,
        )

    assert stub.requests == []
    assert result["messages"] == messages_before
    assert result["features"] == {"memory": False}
    assert emitter.events == []


async def test_channel_turn_is_collaborative():
    module = load_filter()
    with MemoryServiceStub() as stub:
        body = _body(
            {"role": "system", "content": "Bob: hi\nAlice: hello"},
            {"role": "user", "content": "Alice: @model what do I like?"},
        )
        await _inlet(
            _filter(module, stub.url),
            body,
            chat_id="channel:ch-1",
            metadata={"chat_id": "channel:ch-1", "session_id": "channel:ch-1", "folder_id": None},
        )

    assert stub.requests[0].body["chat"] == {
        "user_id": "u-123",
        "user_name": "Alice",
        "chat_id": "channel:ch-1",
        "kind": "channel",
        "folder_id": None,
        "collaborative": True,
        "collaborative_reason": "channel",
        "read_in_temporary": True,
    }
    assert stub.requests[0].body["message"] == "Alice: @model what do I like?"


async def test_chat_id_falls_back_to_metadata():
    module = load_filter()
    with MemoryServiceStub() as stub:
        memory_filter = _filter(module, stub.url)
        await memory_filter.inlet(_body(), __user__={"id": "u-123"}, __metadata__=_metadata())

    assert stub.requests[0].body["chat"]["chat_id"] == CHAT_ID
    assert "user_name" not in stub.requests[0].body["chat"]


def _unreachable(kind: str):
    if kind == "closed_port":
        return None, closed_port_url()
    responders = {
        "server_error": lambda request: StubReply(status=500, json={"detail": "boom"}),
        # a crash of the real service answers 500 before its header is added
        "crash": lambda request: StubReply(
            status=500, raw=b"Internal Server Error", service_version=None
        ),
        "unauthorized": lambda request: StubReply(status=401, json={"detail": "Bad key."}),
        "not_json": lambda request: StubReply(raw=b"<html>oops</html>"),
        "no_block": lambda request: StubReply(json={"memories": []}),
        "block_not_text": lambda request: StubReply(json={"block": ["x"], "memories": []}),
        "memories_not_list": lambda request: StubReply(json={"block": BLOCK, "memories": 3}),
        "json_list": lambda request: StubReply(json=[BLOCK]),
        "not_json_elsewhere": lambda request: StubReply(
            raw=b"<html>a web page</html>", service_version=None
        ),
        "not_the_service": lambda request: StubReply(
            status=404, json={"detail": "Not Found"}, service_version=None
        ),
        "old_service": lambda request: StubReply(
            status=404, json={"detail": "Not Found"}, service_version="0.0.9"
        ),
    }
    return responders[kind], None


#: failures retrying can fix (the user is told it is temporary) …
TRANSIENT = ["closed_port", "server_error", "crash", "not_json"]
#: … and misconfigurations only an admin can fix
LASTING = [
    "unauthorized",
    "no_block",
    "block_not_text",
    "memories_not_list",
    "json_list",
    "not_the_service",
    "old_service",
]


@pytest.mark.parametrize("kind", TRANSIENT + LASTING)
async def test_fails_open_when_the_service_misbehaves(kind):
    module = load_filter()
    emitter = EventRecorder()
    responder, url = _unreachable(kind)
    body = _body()
    messages_before = copy.deepcopy(body["messages"])
    if responder is None:
        result = await _inlet(_filter(module, url), body, emitter=emitter)
    else:
        with MemoryServiceStub(responder) as stub:
            result = await _inlet(_filter(module, stub.url), body, emitter=emitter)
        assert stub.paths() == ["/v1/context"]

    assert result is body
    assert result["messages"] == messages_before
    assert result["features"] == {"memory": False}
    assert emitter.events == [status(UNAVAILABLE if kind in TRANSIENT else MISCONFIGURED)]


@pytest.mark.parametrize(
    ("kind", "cause"),
    [
        ("closed_port", "cannot reach the memory service at {url}"),
        ("server_error", "the memory service at {url} failed (HTTP 500)"),
        ("unauthorized", "the memory service at {url} refused the api_key valve (HTTP 401)"),
        ("not_the_service", "{url} answered HTTP 404 but is not the memory service"),
        ("old_service", "the memory service 0.0.9 at {url} does not understand this filter"),
        ("no_block", "the memory service 0.1.0 at {url} answered in a shape this filter"),
        ("not_json_elsewhere", "{url} answered, but not as the memory service does"),
    ],
)
async def test_an_admin_sees_the_exact_cause_and_a_user_is_told_to_ask_the_admin(kind, cause):
    module = load_filter()
    responder, url = _unreachable(kind)
    seen = {}
    with MemoryServiceStub(responder or default_responder) as stub:
        url = url or stub.url
        for who in ("admin", "user"):
            emitter = EventRecorder()
            user = {**ALICE, "id": f"u-{who}", "role": who}
            await _inlet(_filter(module, url), _body(), emitter=emitter, user=user)
            seen[who] = [e["data"]["description"] for e in emitter.events]

    assert len(seen["admin"]) == 1
    if kind in TRANSIENT and kind != "not_json":
        assert seen == {"admin": [UNAVAILABLE], "user": [UNAVAILABLE]}
    else:
        assert seen["admin"][0].startswith("Memory misconfigured — " + cause.format(url=url))
        assert seen["user"] == [MISCONFIGURED]


async def test_a_user_is_told_of_a_misconfiguration_once_a_day_not_every_turn():
    module = load_filter()
    responder, _ = _unreachable("unauthorized")
    told = []
    with MemoryServiceStub(responder) as stub:
        memory_filter = _filter(module, stub.url)
        for _ in range(3):
            emitter = EventRecorder()
            await _inlet(memory_filter, _body(), emitter=emitter)
            told.append(len(emitter.events))

    assert told == [1, 0, 0]


async def test_a_slow_service_is_abandoned_at_the_timeout():
    module = load_filter()
    emitter = EventRecorder()
    timeout_s = 0.3

    def slow(request):
        return StubReply(json={"block": BLOCK, "memories": []}, delay_s=1.5)

    with MemoryServiceStub(slow) as stub:
        body = _body()
        started = time.perf_counter()
        async with LoopLag() as lag:
            result = await _inlet(
                _filter(module, stub.url, inlet_timeout_s=timeout_s), body, emitter=emitter
            )
        elapsed_s = time.perf_counter() - started

    # on the loop's own clock (wall time less the time a busy machine kept the loop from
    # running): the valve, plus a margin for the event loop, well short of the 1.5 s answer
    loop_s = elapsed_s - lag.lag_s
    assert loop_s < timeout_s + 0.5, f"inlet took {elapsed_s:.3f} s, loop lag {lag.lag_s:.3f} s"
    assert result["messages"][0] == {"role": "system", "content": "You are helpful."}
    assert emitter.events == [status(UNAVAILABLE)]


async def test_no_emitter_and_a_broken_emitter_are_both_survived():
    module = load_filter()

    async def broken(event):
        raise RuntimeError("socket gone")

    def sync_broken(event):
        raise RuntimeError("not async either")

    url = closed_port_url()
    for emitter in (None, broken, sync_broken):
        body = _body()
        result = await _inlet(_filter(module, url), body, emitter=emitter)
        assert result is body
        assert result["features"] == {"memory": False}


async def test_concurrent_inlets_for_two_users_each_get_their_own_block():
    module = load_filter()

    def echo_user(request):
        user_id = request.body["chat"]["user_id"]
        return StubReply(
            json={"block": f"memories of {user_id}", "memories": [{"id": user_id}]}, delay_s=0.3
        )

    with MemoryServiceStub(echo_user) as stub:
        memory_filter = _filter(module, stub.url, inlet_timeout_s=3.0)
        alice_body, bob_body = _body(), _body()
        alice_events, bob_events = EventRecorder(), EventRecorder()
        alice, bob = await asyncio.gather(
            _inlet(
                memory_filter,
                alice_body,
                user={"id": "u-alice", "name": "Alice"},
                emitter=alice_events,
            ),
            _inlet(
                memory_filter, bob_body, user={"id": "u-bob", "name": "Bob"}, emitter=bob_events
            ),
        )

    assert stub.max_in_flight == 2
    assert alice is alice_body and bob is bob_body
    assert alice["messages"][0]["content"] == "You are helpful.\n\nmemories of u-alice"
    assert bob["messages"][0]["content"] == "You are helpful.\n\nmemories of u-bob"
    assert alice_events.events == [status("Recalled 1 memory")]
    assert bob_events.events == [status("Recalled 1 memory")]
    assert list(vars(memory_filter)) == ["valves"]


async def test_metadata_is_read_from_the_body_when_not_passed():
    module = load_filter()
    with MemoryServiceStub() as stub:
        body = _body()
        body["metadata"] = _metadata(folder_id="f-2")
        await _filter(module, stub.url).inlet(body, __user__=ALICE)

    assert stub.requests[0].body["chat"]["chat_id"] == CHAT_ID
    assert stub.requests[0].body["chat"]["folder_id"] == "f-2"


async def test_a_404_of_a_service_of_the_same_version_is_a_wrong_address_not_a_version():
    # issue 30 item 1: only a service of another version is "incompatible"
    module = load_filter()
    seen = {}
    for version in (module.FILTER_VERSION, "0.0.9"):
        with MemoryServiceStub(
            lambda request, version=version: StubReply(
                status=404, json={"detail": "no such path"}, service_version=version
            )
        ) as stub:
            emitter = EventRecorder()
            user = {**ALICE, "id": "u-admin", "role": "admin"}
            await _inlet(_filter(module, stub.url), _body(), emitter=emitter, user=user)
            seen[version] = (stub.url, emitter.events[0]["data"]["description"])

    url, same = seen[module.FILTER_VERSION]
    assert same == (
        f"Memory misconfigured — the memory service {module.FILTER_VERSION} at {url} has no "
        "/v1/context (HTTP 404): check the service_url valve"
    )
    url, older = seen["0.0.9"]
    assert older.startswith(
        f"Memory misconfigured — the memory service 0.0.9 at {url} does not understand this "
        f"filter {module.FILTER_VERSION} (HTTP 404): incompatible versions"
    )
