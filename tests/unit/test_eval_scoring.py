"""Scoring of the model evaluation (bench/eval_scoring.py, bench/eval_proxy.py): verdicts,
token F1, one-to-one matching, question picking, and how relayed extraction answers are read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.eval_llm import endpoint_kind, public_url
from bench.eval_locomo import pick_questions
from bench.eval_proxy import classify_request, extraction_answer_parses, request_fingerprint
from bench.eval_scoring import clean_answer, match_memories, parse_verdict, token_f1
from bench.locomo import QAItem
from service.core.extraction import REPAIR_PROMPT

CORRECT_REPLIES = [
    '{"verdict": "CORRECT"}',
    '{"verdict":"CORRECT"}',
    '{"verdict": "correct"}',
    '```json\n{"verdict": "CORRECT"}\n```',
    '<think>the dates agree</think>{"verdict": "CORRECT"}',
    'Sure. {"verdict": "CORRECT", "reason": "same city"}',
    "CORRECT",
    "CORRECT.",
    "Verdict: CORRECT",
    "**CORRECT**",
    "The answer is CORRECT because both name Porto.",
    "CORRECT - same date in another format",
    " CORRECT\n",
    "Label: CORRECT",
    "CORRECT!",
    '{"label": "x", "verdict": "Correct"}',
    "Final: CORRECT",
    "I grade this CORRECT",
    "(CORRECT)",
    "CORRECT (the reference says the same)",
]
WRONG_REPLIES = [
    '{"verdict": "WRONG"}',
    '{"verdict":"WRONG"}',
    '{"verdict": "wrong"}',
    '{"verdict": "INCORRECT"}',
    '```json\n{"verdict": "WRONG"}\n```',
    '<think>another city</think>{"verdict": "WRONG"}',
    "WRONG",
    "WRONG.",
    "Verdict: WRONG",
    "**WRONG**",
    "INCORRECT",
    "The answer is INCORRECT.",
    "WRONG - it names Lisbon",
    "Label: WRONG",
    "WRONG!",
    "I grade this WRONG",
    "(WRONG)",
    "WRONG (says it does not know)",
    "Final answer: INCORRECT",
    "INCORRECT: different year",
]
UNREADABLE_REPLIES = [
    "",
    "   ",
    "The answer seems to be in the right direction, more or less.",
    "correct",
    "wrong",
    "That looks correct to me.",
    "It is wrong.",
    "CORRECT or WRONG? Hard to say.",
    "Partly CORRECT, partly WRONG.",
    "CORRECTLY answered",
    "WRONGLY stated",
    "Yes",
    "No",
    "1",
    "true",
    '{"verdict": "maybe"}',
    '{"grade": "yes"}',
    "I cannot grade this.",
    "<think>Is it CORRECT? The reference says Porto.</think>Hard to say.",
    "The reference is Porto; the answer says Porto.",
]


def test_judge_verdicts_are_read_on_a_corpus_of_replies() -> None:
    read = {
        "correct": [parse_verdict(t) for t in CORRECT_REPLIES],
        "wrong": [parse_verdict(t) for t in WRONG_REPLIES],
        "unreadable": [parse_verdict(t) for t in UNREADABLE_REPLIES],
    }
    assert (len(CORRECT_REPLIES), len(WRONG_REPLIES), len(UNREADABLE_REPLIES)) == (20, 20, 20)
    assert read["correct"].count(True) == 20
    assert read["wrong"].count(False) == 20
    assert read["unreadable"].count(None) == 20


@pytest.mark.parametrize(
    ("answer", "gold", "f1"),
    [
        ("Pixel", "Pixel", 1.0),
        ("the cello", "cello", 1.0),
        ("May 7, 2023", "7 May 2023", 1.0),
        ("Porto, Portugal", "Porto", 0.6667),
        ("purple submarine", "Pixel", 0.0),
        ("", "", 1.0),
        ("", "Porto", 0.0),
        ("adoption agencies and counseling", "counseling, adoption", 0.8),
    ],
)
def test_token_f1_against_the_gold_answer(answer: str, gold: str, f1: float) -> None:
    assert round(token_f1(answer, gold), 4) == f1


def test_reasoning_blocks_are_not_part_of_the_answer() -> None:
    assert clean_answer("<think>Ada said Porto, in June.</think>\nPorto ") == "Porto"
    assert clean_answer("<THINKING>x</THINKING>Porto") == "Porto"
    assert clean_answer("Porto, in June") == "Porto, in June"
    assert clean_answer("<think>Ada said she would move to") == ""


def test_a_memory_credits_at_most_one_fact_best_pairs_first() -> None:
    # memory 0 is close to both facts; memory 1 only to fact 0
    similarity = np.array([[0.90, 0.80], [0.85, 0.10], [0.50, 0.60]], dtype=np.float32)

    matches, best_memory, best_fact = match_memories(similarity, threshold=0.75)

    assert [(m.memory, m.fact) for m in matches] == [(0, 0)]
    assert best_memory == [0.9, 0.85, 0.6]
    assert best_fact == [0.9, 0.8]
    matches, _, _ = match_memories(similarity, threshold=0.5)
    assert sorted((m.memory, m.fact) for m in matches) == [(0, 0), (2, 1)]


def test_matching_with_no_memories_or_no_facts_matches_nothing() -> None:
    assert match_memories(np.zeros((0, 3), dtype=np.float32)) == ([], [], [0.0, 0.0, 0.0])
    assert match_memories(np.zeros((2, 0), dtype=np.float32)) == ([], [0.0, 0.0], [])


def _item(index: int, category: int) -> QAItem:
    return QAItem(index, f"q{index}", "a", category, ("D1:1",), "Ada")


def test_questions_are_picked_category_by_category_up_to_the_cap() -> None:
    items = [_item(i, c) for i, c in enumerate([4, 4, 4, 2, 1, 4, 2, 3])]

    assert [q.index for q in pick_questions(items, 5)] == [4, 3, 7, 0, 6]
    assert [q.index for q in pick_questions(items, None)] == [4, 3, 7, 0, 6, 1, 2, 5]
    assert pick_questions(items, 0) == []


EXTRACTION_PROMPT = (
    "<user_name>Ada</user_name>\n[u1] 2024-03-03 (Sunday)\n"
    "<new_user_message>I adopted a dog.</new_user_message>"
)
READABLE_ANSWERS = [
    '{"operations": []}',
    '{"operations": [{"op": "NEW", "content": "Ada adopted a dog."}]}',
    '```json\n{"operations": []}\n```',
    '<think>one fact</think>{"operations": []}',
    'Here you go: {"operations": []} Hope it helps.',
    "{'operations': []}",
]
UNREADABLE_ANSWERS = [
    "Sure! Here is what I noticed about the user.",
    "",
    '{"operations": [{"op": "NEW", "content": "Ada ad',
    '{"facts": ["Ada adopted a dog."]}',
    '["Ada adopted a dog."]',
    '{"operations": "none"}',
]


def test_relayed_extraction_answers_are_read_as_the_service_reads_them() -> None:
    assert [extraction_answer_parses(a) for a in READABLE_ANSWERS].count(True) == 6
    assert [extraction_answer_parses(a) for a in UNREADABLE_ANSWERS].count(False) == 6


def test_relayed_requests_are_told_apart_by_the_service_prompts() -> None:
    extraction = {"messages": [{"role": "user", "content": EXTRACTION_PROMPT}]}
    repair = {
        "messages": [
            *extraction["messages"],
            {"role": "assistant", "content": "prose"},
            {"role": "user", "content": REPAIR_PROMPT},
        ]
    }
    summary = {"messages": [{"role": "user", "content": "<chat_summary></chat_summary> ..."}]}
    other = {"messages": [{"role": "user", "content": "Describe the user."}]}

    assert [classify_request(r) for r in (extraction, repair, summary, other)] == [
        "extraction",
        "repair",
        "summary",
        "other",
    ]


def test_a_retried_extraction_is_the_same_request_even_with_other_memories_shown() -> None:
    def request(neighbours: str, date: str = "2024-03-03") -> dict[str, object]:
        prompt = EXTRACTION_PROMPT.replace("2024-03-03", date)
        return {"messages": [{"role": "user", "content": f"{neighbours}\n{prompt}"}]}

    first, retry = request("<m1>none</m1>"), request("<m1>Ada likes tea.</m1>")
    later_day = request("<m1>none</m1>", date="2024-04-20")

    def fingerprint(body: dict[str, object]) -> str:
        return request_fingerprint("extraction", body, json.dumps(body).encode())

    assert fingerprint(first) == fingerprint(retry)
    assert fingerprint(first) != fingerprint(later_day)


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:8080/v1", "local"),
        ("http://localhost:11434/v1", "local"),
        ("http://192.168.1.20:8000/v1", "local"),
        ("http://10.0.0.5/v1", "local"),
        ("http://172.20.0.2:8000/v1", "local"),
        ("http://gpu-box.lan:8000/v1", "local"),
        ("https://api.openai.com/v1", "hosted"),
        ("http://172.40.0.2/v1", "hosted"),
    ],
)
def test_the_endpoint_kind_is_named_from_its_host(url: str, kind: str) -> None:
    assert endpoint_kind(url) == kind


def test_the_results_name_an_endpoint_without_credentials_in_its_url() -> None:
    assert public_url("https://user:sk-secret@api.example.com:8443/v1?key=sk-2") == (
        "https://api.example.com:8443/v1"
    )
    assert public_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
