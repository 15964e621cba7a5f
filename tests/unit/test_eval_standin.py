"""The evaluation's stand-in model (bench/eval_standin.py) across several conversations."""

from __future__ import annotations

import json
from typing import Any

from bench.eval_standin import StandIn
from tests.support.locomo_sample import sample


def _renamed(first: str, second: str, sample_id: str) -> dict[str, Any]:
    text = json.dumps(sample(sample_id)).replace("Ada", first).replace("Ben", second)
    return dict(json.loads(text))


def _extraction_request(name: str, message: str) -> dict[str, Any]:
    prompt = (
        f"<user_name>{name}</user_name>\n\n"
        f"[u1] 2024-03-03 (Sunday)\n<new_user_message>{message}</new_user_message>"
    )
    return {"messages": [{"role": "user", "content": prompt}]}


def test_each_conversation_gets_its_own_facts_though_turn_ids_repeat() -> None:
    # both conversations have a turn "D1:1"; each speaker must get their own fact for it
    stand_in = StandIn([sample(), _renamed("Cleo", "Dan", "conv-other")])

    ada = json.loads(
        stand_in(_extraction_request("Ada", sample()["conversation"]["session_1"][0]["text"]))
    )
    cleo_text = _renamed("Cleo", "Dan", "conv-other")["conversation"]["session_1"][0]["text"]
    cleo = json.loads(stand_in(_extraction_request("Cleo", cleo_text)))

    assert [op["content"] for op in ada["operations"]] == ["Ada adopted a beagle named Pixel."]
    assert [op["content"] for op in cleo["operations"]] == ["Cleo adopted a beagle named Pixel."]


def _answer_request(question: str, notes: str) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": f"<memory_notes>\n{notes}\n</memory_notes>"},
            {"role": "user", "content": f"<question>{question}</question>"},
        ]
    }


def test_the_notes_reader_answers_only_what_the_injected_memories_support() -> None:
    stand_in = StandIn([sample()], answers="notes")
    question = "Where is Ada moving?"

    with_fact = stand_in(_answer_request(question, "- Ada is moving to Porto in June."))
    other_fact = stand_in(_answer_request(question, "- Ada ran her first half marathon."))
    nothing = stand_in(_answer_request(question, "(no memory notes)"))

    assert (with_fact, other_fact, nothing) == ("Porto", "unknown", "unknown")
