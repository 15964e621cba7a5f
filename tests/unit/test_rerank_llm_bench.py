"""bench/rerank_llm.py: the listwise answer's validation, the held-out subsample, the stand-in."""

import json

import pytest

from bench import rerank_llm
from bench import retrieval_sets as rs
from bench.locomo_retrieval import Pool
from bench.rerank_llm import LISTWISE_PROMPT, StandIn, held_out, listwise_messages, parse_listwise


@pytest.mark.parametrize(
    ("answer", "chosen"),
    [
        ('{"relevant": [3, 1]}', [2, 0]),
        ('{"relevant": []}', []),
        ('```json\n{"relevant": ["2", "n4", 2]}\n```', [1, 3]),
        ('{"relevant": [5]}', [4]),
    ],
)
def test_a_valid_answer_gives_the_chosen_positions_best_first(
    answer: str, chosen: list[int]
) -> None:
    assert parse_listwise(answer, 5) == chosen


@pytest.mark.parametrize(
    "answer",
    [
        "Note 2 is the most relevant.",  # prose
        '{"relevant": [6]}',  # out of range
        '{"relevant": [0]}',
        '{"relevant": [1.5]}',
        '{"relevant": [true]}',
        '{"relevant": "1, 2"}',  # not a list
        '{"relevant": [[1]]}',
        '{"notes": [1, 2]}',  # another key
        '{"relevant": ["<number>"]}',  # a copied placeholder
        '{"relevant": [1, 2',  # cut off
        "[1, 2]",
    ],
)
def test_a_malformed_answer_keeps_the_original_order(answer: str) -> None:
    assert parse_listwise(answer, 5) is None


def test_the_listwise_message_numbers_the_notes_on_one_line_each() -> None:
    messages = listwise_messages("Where do I live?", ["User lives\nin Porto", "User is a nurse"])
    assert messages[0] == {"role": "system", "content": LISTWISE_PROMPT}
    assert messages[1]["content"].endswith("Notes:\n1. User lives in Porto\n2. User is a nurse")


def _set(name: str, pools: int, per_pool: int) -> rs.RetrievalSet:
    pool_list = [Pool(f"p{p}", "facts", f"o{p}", [], [], [], rs.NOW) for p in range(pools)]
    questions = [
        rs.Question(p, f"q{p}-{i}", frozenset({"x"}), "g", f"k{p}-{i}")
        for p in range(pools)
        for i in range(per_pool)
    ]
    return rs.RetrievalSet(name, "", pool_list, questions, "facts")


def test_prefeval_with_20_users_is_sampled_from_users_10_to_19_only() -> None:
    subset = held_out(_set("prefeval_explicit_20", 20, 5), 30)
    assert len(subset.questions) == 30
    assert all(q.pool >= 10 for q in subset.questions)
    again = held_out(_set("prefeval_explicit_20", 20, 5), 30)
    assert [q.key for q in again.questions] == [q.key for q in subset.questions]  # fixed seed


def test_other_sets_are_sampled_whole_and_never_beyond_their_size() -> None:
    subset = held_out(_set("multilingual", 1, 12), 40)
    assert [q.key for q in subset.questions] == [f"k0-{i}" for i in range(12)]


def test_the_stand_in_answers_both_prompts_by_shared_words() -> None:
    stand_in = StandIn()
    listwise = stand_in(
        {
            "messages": listwise_messages(
                "Which city do I live in?", ["User is a nurse", "lives: Porto city"]
            )
        }
    )
    assert parse_listwise(listwise, 2) == [1]
    judge = stand_in(
        {
            "messages": [
                {"role": "system", "content": "judge"},
                {
                    "role": "user",
                    "content": "Message: my garden\n\nNotes:\n[n1] User has a cat\n"
                    "[n2] User waters the garden daily",
                },
            ]
        }
    )
    assert json.loads(judge) == {"n1": 0.1, "n2": 0.9}


def test_latency_summary_counts_calls_past_the_inlet_deadline() -> None:
    calls = [
        rerank_llm.Call("listwise", "s", "q1", 0.2, (1.0, 1.0, 1.0), {}, "{}", valid=True),
        rerank_llm.Call("listwise", "s", "q2", 30.0, (3.0, 1.0, 1.0), {}, "x", valid=False),
    ]
    summary = rerank_llm.latency_summary(calls)["listwise"]
    assert summary["n"] == 2
    assert summary["over_inlet_deadline"] == 1
    assert summary["valid_answers"] == 1
    assert summary["load1_range"] == [1.0, 3.0]
