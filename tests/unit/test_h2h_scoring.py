"""The pure pieces of `bench.h2h_openwebui`: journal (resume), memory rule, aggregation."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.h2h_openwebui import pick_questions
from bench.h2h_scoring import (
    DUPLICATE_THRESHOLD,
    FACT_THRESHOLD,
    Journal,
    label_memories,
    memory_counts,
    name_the_user,
    render_markdown,
    summarize_answers,
    turn_sentences,
)
from bench.locomo import QAItem


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=float)
    return vector / np.linalg.norm(vector)


def test_a_rerun_skips_the_steps_the_journal_holds(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.add("builtin/turn/D1:1", seconds=3.5)
    journal.add("builtin/turn/D1:3", seconds=4.0)
    # a crash while writing the third step leaves half a line
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"key": "builtin/turn/D1:5", "sec')

    again = Journal(path)

    assert again.done("builtin/turn/D1:1") and again.done("builtin/turn/D1:3")
    assert not again.done("builtin/turn/D1:5")
    assert [r["seconds"] for r in again.with_prefix("builtin/turn/")] == [3.5, 4.0]


def test_a_step_written_twice_keeps_its_last_record(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    journal.add("ours/memories", memories=[])
    journal.add("ours/memories", memories=[{"content": "x"}])

    record = Journal(tmp_path / "journal.jsonl").get("ours/memories")

    assert record is not None and record["memories"] == [{"content": "x"}]


def test_memories_are_correct_grounded_or_wrong_by_the_written_rule() -> None:
    fact = unit(1, 0, 0, 0)
    turn = unit(0, 1, 0, 0)
    facts, turns = np.array([fact]), np.array([turn])
    memories = np.array(
        [
            unit(1, 0.2, 0, 0),  # cosine 0.98 to the fact
            unit(0.1, 1, 0, 0),  # restates the turn, not the fact
            unit(0, 0, 1, 0),  # nothing said it
        ]
    )

    labels = label_memories(memories, facts, turns)

    assert [label["label"] for label in labels] == ["correct", "grounded", "wrong"]
    assert labels[0]["fact"] == 0 and labels[1]["fact"] is None
    assert [label["duplicate"] for label in labels] == [False, False, False]


def test_the_fact_threshold_is_inclusive_and_below_it_is_not_correct() -> None:
    at = np.array([[FACT_THRESHOLD, np.sqrt(1 - FACT_THRESHOLD**2), 0.0]])
    below = np.array([[FACT_THRESHOLD - 0.01, np.sqrt(1 - (FACT_THRESHOLD - 0.01) ** 2), 0.0]])
    facts, turns = np.array([[1.0, 0.0, 0.0]]), np.zeros((0, 3))

    assert label_memories(at, facts, turns)[0]["label"] == "correct"
    assert label_memories(below, facts, turns)[0]["label"] == "wrong"


def test_a_second_memory_of_the_same_fact_or_a_near_copy_is_a_duplicate() -> None:
    facts = np.array([unit(1, 0, 0), unit(0, 1, 0)])
    turns = np.zeros((0, 3))
    memories = np.array(
        [
            unit(1, 0.3, 0),  # fact 0 (cosine 0.96)
            unit(1, -0.3, 0),  # fact 0 again, worded apart (cosine to the first 0.83)
            unit(0, 0, 1),  # wrong
            unit(0, 0.05, 1),  # wrong, and a near copy of the third (> 0.90)
        ]
    )
    assert float(memories[2] @ memories[3]) >= DUPLICATE_THRESHOLD
    assert float(memories[0] @ memories[1]) < DUPLICATE_THRESHOLD

    labels = label_memories(memories, facts, turns)
    counts = memory_counts(labels, facts_total=2)

    assert [label["duplicate"] for label in labels] == [False, True, False, True]
    assert counts == {
        "stored": 4,
        "correct": 2,
        "grounded": 0,
        "wrong": 2,
        "duplicates": 2,
        "facts_covered": 1,
        "facts_total": 2,
    }


def test_no_memories_give_zero_counts() -> None:
    labels = label_memories(np.zeros((0, 3)), np.array([unit(1, 0, 0)]), np.zeros((0, 3)))
    assert memory_counts(labels, facts_total=1)["stored"] == 0


def _answer(arm: str, question: int, correct: bool | None, ttft: float | None, chars: int):
    return {
        "arm": arm,
        "question": question,
        "correct": correct,
        "injected_chars": chars,
        "injected_tokens": chars // 4,
        "ttft_s": ttft,
        "pre_model_s": 0.1,
    }


def test_answers_are_summed_per_arm_and_the_added_time_is_paired_by_question() -> None:
    answers = [
        _answer("none", 1, False, 1.0, 0),
        _answer("none", 2, False, 2.0, 0),
        _answer("builtin", 1, True, 4.0, 800),
        _answer("builtin", 2, None, 6.0, 1200),  # unreadable verdict
        _answer("ours", 1, True, 1.5, 200),
        _answer("ours", 2, True, None, 200),  # no first token seen: not paired
    ]

    summary = summarize_answers(answers)

    assert summary["builtin"]["correct"] == 1 and summary["builtin"]["unreadable"] == 1
    assert summary["builtin"]["accuracy"] == 0.5
    assert summary["builtin"]["ttft_added_s_mean"] == 3.5  # (3.0 + 4.0) / 2
    assert summary["ours"]["ttft_added_s_mean"] == 0.5 and summary["ours"]["ttft_added_pairs"] == 1
    assert summary["ours"]["injected_chars_mean"] == 200
    assert summary["none"]["ttft_added_s_mean"] == 0.0

    table = render_markdown(
        {
            "command": "python -m bench.h2h_openwebui",
            "model": "m",
            "conversation": "conv-x",
            "sessions": "1,2",
            "speaker": "Audrey",
            "turns": 25,
            "questions": 2,
            "review_interval": 2,
            "memories": {"ours": memory_counts([], 3)},
            "answers": summary,
        }
    )
    assert "| this product's filter (built-in off) | 2 | 2 | 0 |" in table


def _qa(index: int, evidence: tuple[str, ...]) -> QAItem:
    return QAItem(index, "q", "a", 4, evidence, ("Audrey",))


def test_only_questions_whose_evidence_lies_in_the_replayed_sessions_are_asked() -> None:
    items = [_qa(0, ("D1:3",)), _qa(1, ("D1:2", "D3:1")), _qa(2, ("D2:8",)), _qa(3, ("D12:1",))]

    assert [q.index for q in pick_questions(items, [1, 2], 10)] == [0, 2]
    assert [q.index for q in pick_questions(items, [1, 2], 1)] == [0]


def test_the_user_is_named_as_the_dataset_names_the_speaker() -> None:
    assert name_the_user("User adopted Pixie; the user's dogs are four", "Audrey") == (
        "Audrey adopted Pixie; Audrey's dogs are four"
    )
    assert name_the_user("Users of the app", "Audrey") == "Users of the app"


def test_turns_are_split_into_sentences() -> None:
    assert turn_sentences(["Hi! I got a dog. Is it cute?", "  ", "Yes"]) == [
        "Hi!",
        "I got a dog.",
        "Is it cute?",
        "Yes",
    ]
