"""The Remember action checks that the clicking user may write in the chat whose id the
request carries (issue 27, item 4), with Open WebUI's own rule, and the service checks the
chat's owner again (tests/integration/test_other_users_ids.py).

Before, the action looked the chat up for its owner and shares only: a click naming u1's
private chat c1 by u2 (or by an admin) stored the text in c1's Chat Memory, which u1's
inlet then injected.
"""

from __future__ import annotations

import psycopg
import pytest

from testkit.live_service import LiveService
from tests.integration.test_remember_action import _action, _body, _click, _rows
from tests.support.open_webui_fake import FakeOpenWebUI

U2 = {"id": "u2", "name": "Bo", "role": "user"}
ADMIN = {"id": "u9", "name": "Root", "role": "admin"}
PRIVATE = {"c1": {"user_id": "u1", "folder_id": None}}
NOT_YOURS = "Not remembered: you cannot write in this chat"


@pytest.mark.parametrize("clicker", [U2, ADMIN], ids=["another user", "an admin"])
@pytest.mark.parametrize("old_open_webui", [False, True], ids=["0.12.4", "before 0.12.4"])
async def test_a_click_in_another_users_private_chat_stores_nothing(
    service: LiveService,
    db_conn: psycopg.AsyncConnection,
    monkeypatch: pytest.MonkeyPatch,
    clicker: dict[str, str],
    old_open_webui: bool,
) -> None:
    fake = FakeOpenWebUI(chats=PRIVATE, without_accessible_chat=old_open_webui)
    fake.roles = {"u9": "admin"}
    fake.install(monkeypatch)
    line = await _click(_action(service), _body("The hive is red"), user=clicker)
    assert line == NOT_YOURS
    assert await _rows(db_conn) == []
    assert ("get_chat_by_id", ("c1",)) not in fake.calls  # refused before any other lookup


async def test_a_member_of_a_folder_shared_to_continue_may_remember(
    service: LiveService, db_conn: psycopg.AsyncConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeOpenWebUI(
        chats={"c1": {"user_id": "u1", "folder_id": "f1"}},
        folders={"f1": {"user_id": "u1", "parent_id": None, "data": {"share_mode": "continue"}}},
        grants={"f1": [{"principal_type": "user", "principal_id": "u2", "permission": "read"}]},
    )
    fake.install(monkeypatch)
    line = await _click(_action(service), _body("The hive is red"), user=U2)
    assert line.startswith("Remembered: The hive is red [Chat Memory] (#"), line
    assert await _rows(db_conn) == [("c1", "chat", "The hive is red", "active")]


async def test_the_service_refuses_what_a_trusting_open_webui_lets_through(
    service: LiveService, db_conn: psycopg.AsyncConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Open WebUI that hands any chat to any caller (the issue's reproduction): the
    service knows c1 as u1's private chat from u1's turns and answers 403."""
    turn = {"chat": {"user_id": "u1", "chat_id": "c1", "kind": "saved"}}
    posted = service.client.post(
        "/v1/turns", json={**turn, "user_message_id": "t1", "user_message": "I keep bees"}
    )
    assert posted.status_code == 202
    fake = FakeOpenWebUI(chats=PRIVATE, shares={"c1": "continue"})  # lets anyone in
    fake.install(monkeypatch)
    line = await _click(_action(service), _body("The hive is red"), user=U2)
    assert line == NOT_YOURS
    assert await _rows(db_conn) == []


async def test_a_failed_access_check_refuses(
    service: LiveService, db_conn: psycopg.AsyncConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeOpenWebUI(chats=PRIVATE, failing={"get_accessible_chat_by_id"})
    fake.install(monkeypatch)
    line = await _click(_action(service), _body("I keep bees"), user={"id": "u1", "role": "user"})
    assert line.startswith("Not remembered: I could not check that you may use this chat")
    assert await _rows(db_conn) == []
