"""The optional LLM relevance judge never costs a turn its memories (bench/judge_deadline.py).

Real service over HTTP, embedded PostgreSQL, the real all-MiniLM-L6-v2; the LLM is a stand-in
that answers the judge late, as a 1.5B model on CPU does (3–190 s a call,
bench/results/rerank_llm.md). On main the judge ran into the inlet's 0.5 s deadline: the turn
got the cached profile only, and the cancelled call cached nothing, so every turn did.
"""

from __future__ import annotations

from typing import Any

from service.core.ranking import RECALL_HEADER
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub, StubReply
from testkit.waiting import wait_until

CHAT = {"user_id": "ines", "chat_id": "c-1", "kind": "saved"}
# one memory in the judge's band for the message (similarity 0.7–0.93), stored first so that it
# is not among the 5 newest (the core memories every turn gets), and six far from the message
IN_BAND = "The user lives in the city of Porto"
OTHERS = (
    "User works as a nurse at the city hospital",
    "User has a greyhound named Pixel",
    "User plays the cello on Sundays",
    "User is allergic to penicillin",
    "User's favourite film is a silent comedy",
    "User learns Japanese with an app",
)
MESSAGE = "Where does the user live? In which city does the user live?"
# the inlet's deadline raised so that a loaded machine never misses it for other reasons; the
# judge answers after twice that
DEADLINE_S = 4.0
JUDGE_DELAY_S = 8.0


def _responder(request: dict[str, Any]) -> str | StubReply:
    system = str(request["messages"][0]["content"])
    if system.startswith("Rate how useful"):
        # the judge calls the in-band memory useless, late
        return StubReply(text='{"n1": 0.0}', delay_s=JUDGE_DELAY_S)
    return "{}"


def _recalled(block: str) -> str:
    """The query-chosen part of the block (after the core memories)."""
    return block.split(RECALL_HEADER, 1)[1] if RECALL_HEADER in block else ""


def _judge_calls(stub: LLMStub) -> int:
    return sum(
        str(r["messages"][0]["content"]).startswith("Rate how useful") for r in stub.requests
    )


def test_a_judge_slower_than_the_deadline_leaves_the_memories_and_caches_its_answer(
    service_factory: Any,
) -> None:
    with LLMStub(responder=_responder) as stub:
        service: LiveService = service_factory(
            LLM_BASE_URL=stub.base_url,
            LLM_MODEL="stub-model",
            MEMORY_LLM_RELEVANCE="true",
            MEMORY_NEAREST_FILL="false",
            MEMORY_CONTEXT_DEADLINE_S=str(DEADLINE_S),
        )
        for content in (IN_BAND, *OTHERS):
            answer = service.client.post("/v1/users/ines/memories", json={"content": content})
            assert answer.status_code == 201, answer.text
        first = service.client.post("/v1/context", json={"chat": CHAT, "message": MESSAGE})
        assert first.status_code == 200, first.text
        # the bands decided this turn: the memory is there, and the turn was not degraded
        assert "cached profile only" not in first.json()["status"]
        assert IN_BAND in _recalled(first.json()["block"])
        assert _judge_calls(stub) >= 1

        def judged() -> bool:
            # the late judge's score (0.0) is cached: the same message now drops the memory
            again = service.client.post("/v1/context", json={"chat": CHAT, "message": MESSAGE})
            assert again.status_code == 200, again.text
            return IN_BAND not in _recalled(again.json()["block"])

        wait_until(judged, timeout_s=60, what="the late judge's score to be used")
        # a slow judge is not called once per turn: the cached score answers, and at most two
        # are left
        # running at a time
        assert _judge_calls(stub) <= 2
