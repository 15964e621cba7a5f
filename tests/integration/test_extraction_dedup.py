"""Near-duplicate detection never decides between facts that disagree (DESIGN §5.4).

Through the real service and the LLM stand-in: a one-letter correction is applied, a fact
that differs in a number is a fact of its own, a reworded restatement is stored once, and a
DELETE of a fact the same answer restates is dropped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.extraction_replies import by_message, new_op
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

CHAT = {"user_id": "u1", "user_name": "Noor", "chat_id": "chat-1", "kind": "saved"}


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub() as stub:
        yield stub


@pytest.fixture
def extracting(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model", LLM_API_KEY="x")


def _say(service: LiveService, message: str, msg_id: str) -> None:
    turn = {"chat": CHAT, "user_message_id": msg_id, "user_message": message}
    assert service.client.post("/v1/turns", json=turn).status_code == 202
    status = service.wait_for_extraction()
    assert status["turns_failed"] == 0


def _memories(service: LiveService) -> list[tuple[str, str, float]]:
    """(status, content, confidence) of every memory with content, sorted."""
    rows = service.client.get("/v1/users/u1/memories/export").json()
    return sorted((m["status"], m["content"], m["confidence"]) for m in rows)


def _learn(
    service: LiveService, llm: LLMStub, old: str, key: str, ops: list[dict[str, object]]
) -> None:
    """Store `old` (confidence 0.9) from a first turn, then answer `ops` to a message
    containing `key`."""
    llm.responder = by_message({"SEED": [new_op(old)], key: ops})
    _say(service, "SEED", "m0")


def test_a_one_letter_correction_of_a_name_replaces_the_old_fact(
    extracting: LiveService, llm: LLMStub
) -> None:
    update = new_op("User's sister is named Jana", op="UPDATE", ref="m1", confidence=0.95)
    _learn(extracting, llm, "User's sister is named Jane", "Jana", [update])
    _say(extracting, "Sorry, typo: my sister is Jana, not Jane.", "m1")
    assert _memories(extracting) == [
        ("active", "User's sister is named Jana", 0.95),
        ("superseded", "User's sister is named Jane", 0.9),
    ]


def test_a_one_digit_correction_of_a_number_replaces_the_old_fact(
    extracting: LiveService, llm: LLMStub
) -> None:
    update = new_op("User's budget is 1600 euros", op="UPDATE", ref="m1", confidence=0.95)
    _learn(extracting, llm, "User's budget is 1500 euros", "1600", [update])
    _say(extracting, "Correction: my budget is 1600 euros.", "m1")
    assert _memories(extracting) == [
        ("active", "User's budget is 1600 euros", 0.95),
        ("superseded", "User's budget is 1500 euros", 0.9),
    ]


def test_a_new_fact_that_changes_a_number_supersedes_the_old_one(
    extracting: LiveService, llm: LLMStub
) -> None:
    # a NEW where an UPDATE belonged (small models do that): the same attribute of the same
    # person with another value replaces the old fact (core/reconcile.py)
    new = new_op("User's daughter Mia is 8 years old", confidence=0.95)
    _learn(extracting, llm, "User's daughter Mia is 7 years old", "Mia", [new])
    _say(extracting, "Mia turned 8 today!", "m1")
    assert _memories(extracting) == [
        ("active", "User's daughter Mia is 8 years old", 0.95),
        ("superseded", "User's daughter Mia is 7 years old", 0.9),
    ]


def test_a_new_fact_about_another_time_is_stored_beside_the_old_one(
    extracting: LiveService, llm: LLMStub
) -> None:
    new = new_op("User ran a marathon in 2023", confidence=0.95)
    _learn(extracting, llm, "User ran a marathon in 2019", "again", [new])
    _say(extracting, "I ran a marathon again in 2023", "m1")
    assert _memories(extracting) == [
        ("active", "User ran a marathon in 2019", 0.9),
        ("active", "User ran a marathon in 2023", 0.95),
    ]


def test_a_restated_fact_reworded_by_the_llm_is_stored_once(
    extracting: LiveService, llm: LLMStub
) -> None:
    reworded = new_op("The user has a sister named Jane.")
    _learn(extracting, llm, "User has a sister named Jane", "Jane", [reworded])
    _say(extracting, "As I said, I have a sister, Jane.", "m1")
    # said again: one row, its confidence raised 0.9 -> 1 - 0.1 * 0.7
    assert _memories(extracting) == [("active", "User has a sister named Jane", 0.93)]


def test_a_delete_of_a_fact_the_same_answer_restates_is_dropped(
    extracting: LiveService, llm: LLMStub
) -> None:
    ops = [new_op("User lives in Berlin"), new_op("", op="DELETE", ref="m1")]
    _learn(extracting, llm, "User lives in Berlin", "Berlin", ops)
    _say(extracting, "I still live in Berlin.", "m1")
    assert _memories(extracting) == [("active", "User lives in Berlin", 0.93)]


def test_a_delete_beside_a_negated_restatement_is_applied(
    extracting: LiveService, llm: LLMStub
) -> None:
    ops = [new_op("", op="DELETE", ref="m1"), new_op("User does not eat meat")]
    _learn(extracting, llm, "User eats meat", "meat", ops)
    _say(extracting, "I stopped eating meat.", "m1")
    assert _memories(extracting) == [
        ("active", "User does not eat meat", 0.9),
        ("archived", "User eats meat", 0.9),
    ]
