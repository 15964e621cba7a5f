"""Whose fact is it (issue 14, item 10): facts about other people stay theirs, and a name the
user only mentions never becomes the user's name — said in the prompt, enforced in code."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from testkit.extraction_replies import by_message, new_op
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

CHAT = {"user_id": "u-robin", "user_name": "Robin Meyer", "chat_id": "c-whose", "kind": "saved"}

# What a careless LLM answers: the bad fact first, then a good one.
BAD_ANSWERS = {
    "Jane Ortiz": [
        new_op("User's name is Jane Ortiz", tags=["identity"]),
        new_op("User handles customer invoices at work", tags=["behavior"]),
    ],
    "Luis Ortega": [new_op("El usuario se llama Luis Ortega", tags=["identity"])],
    "brother": [
        new_op("User can't stand cilantro", tags=["preference"]),
        new_op("User's brother can't stand cilantro", tags=["relationship"]),
    ],
    "Robin here": [new_op("User's name is Robin", tags=["identity"])],
    "my wife and I": [new_op("User loves hiking in the Alps", tags=["preference"])],
}


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(responder=by_message(BAD_ANSWERS)) as stub:
        yield stub


@pytest.fixture
def live(service_factory: Callable[..., LiveService], llm: LLMStub) -> LiveService:
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")


def _say(live: LiveService, message: str, msg_id: str) -> None:
    turn = {"chat": CHAT, "user_message_id": msg_id, "user_message": message}
    assert live.client.post("/v1/turns", json=turn).status_code == 202


def _active(live: LiveService) -> list[str]:
    items = live.client.get("/v1/users/u-robin/memories").json()["items"]
    return sorted(m["content"] for m in items)


def test_a_name_the_user_only_asks_about_never_becomes_the_users_name(
    live: LiveService,
) -> None:
    _say(live, "Find the invoices of customer Jane Ortiz from March.", "m1")
    _say(live, "Busca el contrato de Luis Ortega, por favor.", "m2")
    assert live.wait_for_extraction()["turns_done"] == 2
    assert _active(live) == ["User handles customer invoices at work"]


def test_the_users_own_name_as_open_webui_gives_it_is_kept(live: LiveService) -> None:
    _say(live, "Robin here, nice to meet you.", "m1")
    live.wait_for_extraction()
    assert _active(live) == ["User's name is Robin"]


def test_a_fact_about_the_users_brother_is_never_stored_as_the_users(
    live: LiveService,
) -> None:
    _say(live, "Cooking for my brother tonight. My brother can't stand cilantro.", "m1")
    _say(live, "my wife and I love hiking in the Alps", "m2")
    assert live.wait_for_extraction()["turns_done"] == 2
    assert _active(live) == ["User loves hiking in the Alps", "User's brother can't stand cilantro"]


def test_the_extraction_prompt_says_whose_fact_it_is(live: LiveService, llm: LLMStub) -> None:
    _say(live, "Find the invoices of customer Jane Ortiz from March.", "m1")
    live.wait_for_extraction()
    system = llm.requests[-1]["messages"][0]["content"]
    assert "my brother can't stand cilantro" in system
    assert 'never "User can\'t stand cilantro"' in system
    assert "find the invoices of customer Jane Ortiz" in system
    assert "<user_name>" in system
