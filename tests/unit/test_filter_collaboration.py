"""Folder and collaboration facts of saved chats, read from Open WebUI's tables (DESIGN §2)."""

import importlib.util

import pytest

from testkit.filter_loader import load_filter
from tests.support.memory_stub import TEST_TIMEOUT_S, MemoryServiceStub
from tests.support.open_webui_fake import FakeOpenWebUI

CHAT_ID = "7f0c2d4e-0000-4000-8000-000000000001"
SENDER = {"id": "u-123", "name": "Alice"}


def _body() -> dict:
    return {"messages": [{"role": "user", "content": "What do I like?"}]}


async def _sent_chat(metadata_folder_id: str | None = "f-meta", chat_id: str = CHAT_ID) -> dict:
    """Run one inlet and return the `chat` object the service received."""
    module = load_filter()
    with MemoryServiceStub() as stub:
        memory_filter = module.Filter()
        memory_filter.valves = module.Filter.Valves(
            service_url=stub.url, inlet_timeout_s=TEST_TIMEOUT_S
        )
        await memory_filter.inlet(
            _body(),
            __user__=SENDER,
            __metadata__={"chat_id": chat_id, "folder_id": metadata_folder_id},
            __chat_id__=chat_id,
        )
    assert stub.paths() == ["/v1/context"]
    return stub.requests[0].body["chat"]


def _facts(chat: dict) -> tuple:
    return chat["folder_id"], chat["collaborative"], chat["collaborative_reason"]


@pytest.mark.skipif(
    importlib.util.find_spec("open_webui") is not None, reason="needs open_webui absent"
)
async def test_outside_open_webui_the_metadata_folder_is_trusted():
    chat = await _sent_chat("f-meta")

    assert _facts(chat) == ("f-meta", False, None)


async def test_private_chat_without_folder(monkeypatch):
    FakeOpenWebUI(chats={CHAT_ID: {"user_id": "u-123", "folder_id": None}}).install(monkeypatch)

    assert _facts(await _sent_chat("f-meta")) == (None, False, None)


@pytest.mark.parametrize("asynchronous", [True, False], ids=["async tables", "sync tables"])
async def test_private_folder_granted_only_to_its_owner(monkeypatch, asynchronous):
    fake = FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-123", "folder_id": "f-1"}},
        folders={"f-1": {"user_id": "u-123", "parent_id": None}},
        grants={
            "f-1": [{"principal_type": "user", "principal_id": "u-123", "permission": "write"}]
        },
        asynchronous=asynchronous,
    )
    fake.install(monkeypatch)

    assert _facts(await _sent_chat(None)) == ("f-1", False, None)
    assert [name for name, _ in fake.calls] == [
        "get_chat_by_id",
        "get_by_chat_id",
        "get_folder_by_id",
        "get_grants_by_resource",
        "get_folder_by_id",
        "has_folder_access",
    ]
    assert fake.calls[-1][1][0::2] == ("u-123", "read")


async def test_a_sender_who_is_a_member_of_the_owner_s_folder_gets_it(monkeypatch):
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-owner", "folder_id": "f-1"}},
        folders={"f-1": {"user_id": "u-owner", "parent_id": None}},
        grants={"f-1": [{"principal_type": "user", "principal_id": "u-123", "permission": "read"}]},
    ).install(monkeypatch)

    assert _facts(await _sent_chat(None)) == ("f-1", True, "sender_not_owner")


async def test_a_continue_mode_share_in_the_owner_s_private_folder_sends_no_folder(monkeypatch):
    # The sender may post in the shared chat, but is no member of the folder it sits in.
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-owner", "folder_id": "f-1", "share_id": "s-1"}},
        shares={CHAT_ID: "continue"},
        folders={"f-1": {"user_id": "u-owner", "parent_id": None}},
    ).install(monkeypatch)

    assert _facts(await _sent_chat("f-1")) == (None, True, "sender_not_owner")


async def test_a_revoked_grant_takes_the_folder_from_the_user_s_own_chat_in_it(monkeypatch):
    # Bob's chat stays in Carol's folder after Carol withdrew his grant (Dave keeps his).
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-123", "folder_id": "f-1"}},
        folders={"f-1": {"user_id": "u-carol", "parent_id": None}},
        grants={
            "f-1": [{"principal_type": "user", "principal_id": "u-dave", "permission": "read"}]
        },
    ).install(monkeypatch)

    assert _facts(await _sent_chat("f-1")) == (None, True, "folder_shared")


@pytest.mark.parametrize(
    ("grant", "groups"),
    [
        pytest.param(
            {"principal_type": "group", "principal_id": "g-1"}, {"g-1": {"u-123"}}, id="group"
        ),
        pytest.param({"principal_type": "user", "principal_id": "u-123"}, {}, id="user"),
    ],
)
async def test_a_grant_on_an_ancestor_makes_the_sender_a_member(monkeypatch, grant, groups):
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-owner", "folder_id": "f-child"}},
        folders={
            "f-child": {"user_id": "u-owner", "parent_id": "f-root"},
            "f-root": {"user_id": "u-owner", "parent_id": None},
        },
        grants={"f-root": [{**grant, "permission": "read"}]},
        groups=groups,
    ).install(monkeypatch)

    assert _facts(await _sent_chat(None)) == ("f-child", True, "sender_not_owner")


async def test_a_group_the_sender_left_gives_no_folder(monkeypatch):
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-owner", "folder_id": "f-1"}},
        folders={"f-1": {"user_id": "u-owner", "parent_id": None}},
        grants={"f-1": [{"principal_type": "group", "principal_id": "g-1", "permission": "read"}]},
        groups={"g-1": {"u-dave"}},
    ).install(monkeypatch)

    assert _facts(await _sent_chat(None)) == (None, True, "sender_not_owner")


async def test_a_failed_membership_lookup_sends_no_folder(monkeypatch):
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-owner", "folder_id": "f-1"}},
        folders={"f-1": {"user_id": "u-owner", "parent_id": None}},
        grants={"f-1": [{"principal_type": "user", "principal_id": "u-123", "permission": "read"}]},
        failing={"has_folder_access"},
    ).install(monkeypatch)

    assert _facts(await _sent_chat(None)) == (None, True, "sender_not_owner")


async def test_a_temporary_chat_from_a_folder_of_someone_else_gets_no_folder(monkeypatch):
    # The folder of a temporary chat is what the client sent: any id at all.
    FakeOpenWebUI(folders={"f-1": {"user_id": "u-carol", "parent_id": None}}).install(monkeypatch)

    chat = await _sent_chat("f-1", chat_id="temporary:sid-1")

    assert _facts(chat) == (None, False, None)


@pytest.mark.parametrize("asynchronous", [True, False], ids=["async tables", "sync tables"])
async def test_a_grant_on_an_ancestor_folder_shares_the_chat(monkeypatch, asynchronous):
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-123", "folder_id": "f-child"}},
        folders={
            "f-child": {"user_id": "u-123", "parent_id": "f-mid"},
            "f-mid": {"user_id": "u-123", "parent_id": "f-root"},
            "f-root": {"user_id": "u-123", "parent_id": None},
        },
        grants={
            "f-root": [{"principal_type": "group", "principal_id": "g-1", "permission": "read"}]
        },
        asynchronous=asynchronous,
    ).install(monkeypatch)

    assert _facts(await _sent_chat(None)) == ("f-child", True, "folder_shared")


async def test_a_grant_to_another_user_shares_the_folder(monkeypatch):
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-123", "folder_id": "f-1"}},
        folders={
            "f-1": {"user_id": "u-123", "parent_id": None, "data": {"share_mode": "continue"}}
        },
        grants={"f-1": [{"principal_type": "user", "principal_id": "u-bob", "permission": "read"}]},
    ).install(monkeypatch)

    assert _facts(await _sent_chat(None)) == ("f-1", True, "folder_shared")


async def test_a_folder_owned_by_someone_else_is_shared(monkeypatch):
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-123", "folder_id": "f-1"}},
        folders={"f-1": {"user_id": "u-carol", "parent_id": None}},
        grants={"f-1": [{"principal_type": "user", "principal_id": "u-123", "permission": "read"}]},
    ).install(monkeypatch)

    assert _facts(await _sent_chat(None)) == ("f-1", True, "folder_shared")


async def test_a_chat_shared_to_continue_is_collaborative(monkeypatch):
    # Open WebUI keeps the mode on the share snapshot, not on the chat row.
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-123", "folder_id": None, "share_id": "s-1"}},
        shares={CHAT_ID: "continue"},
    ).install(monkeypatch)

    assert _facts(await _sent_chat(None)) == (None, True, "chat_shared")


async def test_a_chat_shared_as_a_snapshot_stays_private(monkeypatch):
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-123", "folder_id": None, "share_id": "s-1"}},
        shares={CHAT_ID: None},
    ).install(monkeypatch)

    assert _facts(await _sent_chat(None)) == (None, False, None)


@pytest.mark.parametrize(
    ("fake", "expected"),
    [
        pytest.param(
            FakeOpenWebUI(chats={CHAT_ID: {"user_id": "u-123"}}, failing={"get_chat_by_id"}),
            (None, True, "lookup_failed"),
            id="chat lookup raises",
        ),
        pytest.param(FakeOpenWebUI(), (None, True, "lookup_failed"), id="chat not found"),
        pytest.param(
            FakeOpenWebUI(
                chats={CHAT_ID: {"user_id": "u-123", "folder_id": "f-1"}},
                folders={"f-1": {"user_id": "u-123", "parent_id": None}},
                failing={"get_grants_by_resource"},
            ),
            ("f-1", True, "lookup_failed"),
            id="grant lookup raises",
        ),
        pytest.param(
            FakeOpenWebUI(
                chats={CHAT_ID: {"user_id": "u-123", "folder_id": None}}, failing={"get_by_chat_id"}
            ),
            (None, True, "lookup_failed"),
            id="share lookup raises",
        ),
        pytest.param(
            FakeOpenWebUI(chats={CHAT_ID: {"user_id": "u-123", "folder_id": "f-gone"}}),
            (None, True, "lookup_failed"),
            id="folder not found",
        ),
        pytest.param(
            FakeOpenWebUI(
                chats={CHAT_ID: {"user_id": "u-123", "folder_id": "f-a"}},
                folders={
                    "f-a": {"user_id": "u-123", "parent_id": "f-b"},
                    "f-b": {"user_id": "u-123", "parent_id": "f-a"},
                },
            ),
            ("f-a", True, "lookup_failed"),
            id="folder cycle",
        ),
    ],
)
async def test_a_failed_lookup_is_treated_as_collaborative(monkeypatch, fake, expected):
    fake.install(monkeypatch)

    assert _facts(await _sent_chat("f-meta")) == expected


async def test_open_webui_without_the_expected_tables_is_a_failed_lookup(monkeypatch):
    FakeOpenWebUI().install(monkeypatch, with_models=False)

    assert _facts(await _sent_chat("f-meta")) == (None, True, "lookup_failed")


async def test_temporary_chats_take_a_folder_of_the_sender_from_metadata(monkeypatch):
    fake = FakeOpenWebUI(
        folders={"f-meta": {"user_id": "u-123", "parent_id": None}},
        failing={"get_chat_by_id", "get_by_chat_id", "get_grants_by_resource"},
    )
    fake.install(monkeypatch)

    chat = await _sent_chat("f-meta", chat_id="temporary:sid-1")

    assert _facts(chat) == ("f-meta", False, None)
    assert [name for name, _ in fake.calls] == ["get_folder_by_id", "has_folder_access"]


async def test_outlet_uses_the_same_facts(monkeypatch):
    FakeOpenWebUI(
        chats={CHAT_ID: {"user_id": "u-owner", "folder_id": "f-1"}},
        folders={"f-1": {"user_id": "u-owner", "parent_id": None}},
    ).install(monkeypatch)
    module = load_filter()
    body = {
        "chat_id": CHAT_ID,
        "id": "a-1",
        "messages": [
            {"id": "u-1", "role": "user", "content": "I prefer short answers."},
            {"id": "a-1", "role": "assistant", "content": "Understood."},
        ],
    }
    with MemoryServiceStub() as stub:
        memory_filter = module.Filter()
        memory_filter.valves = module.Filter.Valves(
            service_url=stub.url, inlet_timeout_s=TEST_TIMEOUT_S
        )
        await memory_filter.outlet(body, __user__=SENDER)

    assert stub.paths() == ["/v1/turns"]
    assert _facts(stub.requests[0].body["chat"]) == (None, True, "sender_not_owner")
