"""Outlet: the finished turn handed to POST /v1/turns, and the body left as it was."""

import json

import pytest

from testkit.filter_loader import load_filter
from testkit.waiting import wait_until
from tests.support.emitter import EventRecorder, status
from tests.support.memory_stub import TEST_TIMEOUT_S, MemoryServiceStub, StubReply, closed_port_url

CHAT_ID = "7f0c2d4e-0000-4000-8000-000000000001"
ALICE = {"id": "u-123", "name": "Alice"}
NOT_SAVED = "Memory could not save this turn"


def _filter(module, url: str, **valves):
    memory_filter = module.Filter()
    # the stub gets TEST_TIMEOUT_S unless a test sets a valve: a busy machine must not turn an
    # answer into "unavailable" (the valves' own timing is tested in test_fail_open)
    patient = {"inlet_timeout_s": TEST_TIMEOUT_S, "outlet_timeout_s": TEST_TIMEOUT_S}
    memory_filter.valves = module.Filter.Valves(
        service_url=url, api_key="key-1", **{**patient, **valves}
    )
    return memory_filter


def _saved_chat_body() -> dict:
    """The outlet body of a saved chat: the DB branch, ids and timestamps on every message."""
    return {
        "model": "m",
        "chat_id": CHAT_ID,
        "session_id": "sid-1",
        "filter_ids": [],
        "id": "a-2",
        "messages": [
            {
                "id": "u-1",
                "role": "user",
                "content": "I have a cat called Tom.",
                "timestamp": 1683554000,
                "info": {},
            },
            {
                "id": "a-1",
                "role": "assistant",
                "content": "Nice! How old is Tom?",
                "timestamp": 1683554001,
                "info": {},
            },
            {
                "id": "u-2",
                "role": "user",
                "content": [
                    {"type": "text", "text": "He is three. Here he is:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
                "timestamp": 1683554160,
                "info": {},
            },
            {
                "id": "a-2",
                "role": "assistant",
                "content": '<details type="reasoning" done="true">\nthinking\n</details>\n'
                "What a lovely cat!",
                "output": [{"type": "message"}],
                "timestamp": 1683554161,
                "finish_reason": "stop",
            },
        ],
    }


async def test_saved_chat_turn_is_handed_over_as_the_contract_says():
    module = load_filter()
    emitter = EventRecorder()
    with MemoryServiceStub() as stub:
        body = _saved_chat_body()
        before = json.dumps(body, sort_keys=True)

        result = await _filter(module, stub.url).outlet(
            body,
            __user__=ALICE,
            __metadata__={"chat_id": CHAT_ID, "folder_id": "f-1"},
            __event_emitter__=emitter,
        )

    assert result is body
    assert json.dumps(result, sort_keys=True) == before
    assert stub.paths() == ["/v1/turns"]
    assert stub.requests[0].headers["authorization"] == "Bearer key-1"
    assert stub.requests[0].body == {
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
        "user_message_id": "u-2",
        "user_message": "He is three. Here he is:",
        "assistant_message": "What a lovely cat!",
        "history": [
            {"role": "user", "content": "I have a cat called Tom."},
            {"role": "assistant", "content": "Nice! How old is Tom?"},
        ],
        "occurred_at": "2023-05-08T13:56:00Z",
        "parent_message_id": "a-1",  # the message before it in the branch: edits are told apart
    }
    assert b"base64" not in stub.requests[0].raw_body
    assert emitter.events == []


async def test_chat_id_comes_from_the_body_when_metadata_is_missing():
    module = load_filter()
    with MemoryServiceStub() as stub:
        await _filter(module, stub.url).outlet(_saved_chat_body(), __user__=ALICE)

    chat = stub.requests[0].body["chat"]
    assert (chat["chat_id"], chat["kind"], chat["folder_id"]) == (CHAT_ID, "saved", None)


async def test_history_keeps_the_six_latest_text_messages():
    module = load_filter()
    earlier = []
    for n in range(1, 6):
        earlier.append({"id": f"u-{n}", "role": "user", "content": f"question {n}"})
        earlier.append({"id": f"a-{n}", "role": "assistant", "content": f"answer {n}"})
    earlier.insert(4, {"id": "s-1", "role": "system", "content": "[CONVERSATION SUMMARY] ..."})
    earlier.insert(6, {"id": "a-x", "role": "assistant", "content": ""})
    body = {
        "chat_id": CHAT_ID,
        "id": "a-9",
        "messages": [
            *earlier,
            {"id": "u-9", "role": "user", "content": "question 9"},
            {"id": "a-9", "role": "assistant", "content": "answer 9"},
        ],
    }
    with MemoryServiceStub() as stub:
        await _filter(module, stub.url).outlet(body, __user__=ALICE)

    sent = stub.requests[0].body
    assert sent["history"] == [
        {"role": "user", "content": "question 3"},
        {"role": "assistant", "content": "answer 3"},
        {"role": "user", "content": "question 4"},
        {"role": "assistant", "content": "answer 4"},
        {"role": "user", "content": "question 5"},
        {"role": "assistant", "content": "answer 5"},
    ]
    assert (sent["user_message_id"], sent["user_message"]) == ("u-9", "question 9")
    assert "occurred_at" not in sent


async def test_channel_reply_without_message_ids_is_keyed_by_the_reply():
    module = load_filter()
    body = {
        "model": "m",
        "chat_id": "channel:ch-1",
        "session_id": "channel:ch-1",
        "id": "msg-77",
        "messages": [
            {"role": "system", "content": "Bob: hi\nAlice: hello"},
            {"role": "user", "content": "Alice: @model remember I moved to Oslo"},
            {
                "id": "msg-77",
                "role": "assistant",
                "content": "Noted, Oslo it is.",
                "output": [],
                "usage": {},
                "finish_reason": "stop",
            },
        ],
    }
    with MemoryServiceStub() as stub:
        before = json.dumps(body, sort_keys=True)
        result = await _filter(module, stub.url).outlet(body, __user__=ALICE)

    assert json.dumps(result, sort_keys=True) == before
    assert stub.requests[0].body == {
        "chat": {
            "user_id": "u-123",
            "user_name": "Alice",
            "chat_id": "channel:ch-1",
            "kind": "channel",
            "folder_id": None,
            "collaborative": True,
            "collaborative_reason": "channel",
            "read_in_temporary": True,
        },
        "user_message_id": "reply:msg-77",
        "user_message": "Alice: @model remember I moved to Oslo",
        "assistant_message": "Noted, Oslo it is.",
        "history": [],
    }


async def test_the_last_assistant_message_is_the_reply_when_the_id_does_not_match():
    module = load_filter()
    body = {
        "chat_id": CHAT_ID,
        "id": "msg-synthetic",
        "messages": [
            {"id": "u-1", "role": "user", "content": "first"},
            {"id": "a-1", "role": "assistant", "content": "one"},
            {"id": "u-2", "role": "user", "content": "second", "timestamp": 1683554160000},
            {"id": "a-2", "role": "assistant", "content": "two"},
        ],
    }
    with MemoryServiceStub() as stub:
        await _filter(module, stub.url).outlet(body, __user__=ALICE)

    sent = stub.requests[0].body
    assert (sent["user_message_id"], sent["user_message"], sent["assistant_message"]) == (
        "u-2",
        "second",
        "two",
    )
    assert sent["occurred_at"] == "2023-05-08T13:56:00Z"


async def test_occurred_at_falls_back_to_the_metadata_user_message():
    module = load_filter()
    body = _saved_chat_body()
    del body["messages"][2]["timestamp"]
    with MemoryServiceStub() as stub:
        await _filter(module, stub.url).outlet(
            body, __user__=ALICE, __metadata__={"user_message": {"timestamp": 1683554160}}
        )

    assert stub.requests[0].body["occurred_at"] == "2023-05-08T13:56:00Z"


@pytest.mark.parametrize(
    ("sent_id", "expected"),
    [
        ("u-2", "2023-04-28T13:56:00Z"),  # the client's stamp: when the user wrote it
        ("u-other", "2023-05-08T13:56:00Z"),  # another message: the stored one's own
    ],
)
async def test_occurred_at_is_when_the_client_sent_the_message_not_when_it_was_saved(
    sent_id: str, expected: str
):
    # Open WebUI 0.12.4 stores a new message of a saved chat with its own clock
    # (Chats.insert_chat_turn); the client's `timestamp` survives only in
    # __metadata__["user_message"]. A chat replayed or imported days later is dated by it.
    module = load_filter()
    sent = {"id": sent_id, "role": "user", "timestamp": 1683554160 - 10 * 86_400}
    with MemoryServiceStub() as stub:
        await _filter(module, stub.url).outlet(
            _saved_chat_body(), __user__=ALICE, __metadata__={"user_message": sent}
        )

    assert stub.requests[0].body["occurred_at"] == expected


@pytest.mark.parametrize(
    "wild",
    [
        4_102_444_800,  # 2100-01-01: a clock decades ahead (the service would answer 422)
        631_152_000,  # 1990-01-01
        "1683554160",  # not a number
        float("nan"),
    ],
)
async def test_a_client_stamp_that_cannot_be_right_gives_way_to_the_stored_one(wild: object):
    module = load_filter()
    sent = {"id": "u-2", "role": "user", "timestamp": wild}
    with MemoryServiceStub() as stub:
        await _filter(module, stub.url).outlet(
            _saved_chat_body(), __user__=ALICE, __metadata__={"user_message": sent}
        )

    assert stub.requests[0].body["occurred_at"] == "2023-05-08T13:56:00Z"


@pytest.mark.parametrize(
    "messages",
    [
        pytest.param([{"role": "assistant", "content": "hello"}], id="no user message"),
        pytest.param(
            [
                {
                    "id": "u-1",
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "data:x"}}],
                },
                {"id": "a-1", "role": "assistant", "content": "a picture"},
            ],
            id="image only",
        ),
        pytest.param([], id="empty"),
    ],
)
async def test_nothing_is_handed_over_without_user_text(messages):
    module = load_filter()
    with MemoryServiceStub() as stub:
        body = {"chat_id": CHAT_ID, "id": "a-1", "messages": messages}
        result = await _filter(module, stub.url).outlet(body, __user__=ALICE)

    assert result is body
    assert stub.requests == []


@pytest.mark.parametrize("chat_id", ["temporary:sid-1", "local:sid-1"])
async def test_temporary_chats_are_never_written(chat_id):
    module = load_filter()
    with MemoryServiceStub() as stub:
        body = {**_saved_chat_body(), "chat_id": chat_id}
        before = json.dumps(body, sort_keys=True)
        result = await _filter(module, stub.url).outlet(body, __user__=ALICE)

    assert json.dumps(result, sort_keys=True) == before
    assert stub.requests == []


@pytest.mark.parametrize("failure", ["closed_port", "server_error", "slow"])
async def test_a_failed_hand_over_shows_a_status_and_keeps_the_body(failure):
    module = load_filter()
    emitter = EventRecorder()
    body = _saved_chat_body()
    before = json.dumps(body, sort_keys=True)
    if failure == "closed_port":
        result = await _filter(module, closed_port_url()).outlet(
            body, __user__=ALICE, __event_emitter__=emitter
        )
    else:

        def reply(request):
            if failure == "slow":  # far slower than the valve, whatever the machine's load
                return StubReply(status=202, json={"status": "queued"}, delay_s=30.0)
            return StubReply(status=500, json={"detail": "boom"})

        # the valve leaves a loaded machine time to deliver the request; the stub may still
        # be reading it when the filter gives up, hence the poll
        with MemoryServiceStub(reply) as stub:
            result = await _filter(module, stub.url, outlet_timeout_s=1.0).outlet(
                body, __user__=ALICE, __event_emitter__=emitter
            )
            assert wait_until(lambda: stub.paths(), what="the hand-over") == ["/v1/turns"]

    assert result is body
    assert json.dumps(result, sort_keys=True) == before
    assert emitter.events == [status(NOT_SAVED)]


async def test_a_failed_hand_over_is_silent_without_status_or_emitter():
    module = load_filter()
    url = closed_port_url()
    quiet = {**ALICE, "valves": module.Filter.UserValves(show_status=False)}
    emitter = EventRecorder()

    await _filter(module, url).outlet(_saved_chat_body(), __user__=quiet, __event_emitter__=emitter)
    result = await _filter(module, url).outlet(_saved_chat_body(), __user__=ALICE)

    assert emitter.events == []
    assert result["id"] == "a-2"


@pytest.mark.parametrize("answer", ["queued", "duplicate", "skipped", None])
async def test_every_accepted_answer_is_quiet(answer):
    module = load_filter()
    emitter = EventRecorder()

    def reply(request):
        if answer is None:
            return StubReply(status=202, raw=b"")
        return StubReply(status=202, json={"status": answer, "detail": "ok"})

    with MemoryServiceStub(reply) as stub:
        await _filter(module, stub.url).outlet(
            _saved_chat_body(), __user__=ALICE, __event_emitter__=emitter
        )

    assert stub.paths() == ["/v1/turns"]
    assert emitter.events == []
