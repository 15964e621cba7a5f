"""Scoring of the model evaluation (`python -m service eval`): pure functions, no I/O.

- the answer and judge prompts (our own wording; the judge follows the LLM-judge protocol
  published for LoCoMo in spirit: a generous CORRECT/WRONG verdict on the gold answer, not a
  copy of anyone's prompt);
- reading the judge's verdict;
- token F1 between an answer and the gold answer;
- one-to-one matching of written memories to the dataset's observation facts by cosine
  similarity, for extraction precision and recall;
- per-category and overall summaries of the answers.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.locomo import CATEGORY_NAMES, QA_CATEGORIES

__all__ = [
    "MATCH_THRESHOLD",
    "Match",
    "answer_messages",
    "clean_answer",
    "judge_messages",
    "match_memories",
    "normalize_answer",
    "parse_verdict",
    "summarize_answers",
    "token_f1",
    "verdict_json",
]

#: Cosine similarity (all-MiniLM-L6-v2, the service's bundled model) from which a memory
#: counts as stating a fact. Measured on 24 reworded LoCoMo facts of conv-26 written the way
#: an extractor writes them: each scored 0.76–0.98 against its own fact, so 0.75 admits all of
#: them; the same rewordings scored 0.61–0.92 against the nearest *other* fact of the same
#: speaker (11 of 24 above 0.75), which is why matching is one-to-one (a memory credits at most
#: one fact, best pairs first): then 23 of the 24 rewordings were matched to their own fact.
MATCH_THRESHOLD = 0.75

ANSWER_SYSTEM = (
    "You answer a question about the user from your memory of earlier conversations. "
    "Use only the memory notes below; dates in them are when things were said. "
    "Answer in a few words (a name, a date, a short phrase), not a sentence. "
    "If the notes do not contain the answer, say: unknown."
)

JUDGE_SYSTEM = (
    "You grade an answer to a question about a past conversation against the reference "
    "answer. Grade CORRECT when the answer refers to the same thing as the reference: "
    "other wording, extra detail or another date format are fine, and a date or period that "
    "clearly means the same time counts. Grade WRONG when it names something else, misses the "
    "point, or says it does not know. "
    'Reply with only a JSON object: {"verdict": "CORRECT"} or {"verdict": "WRONG"}.'
)

_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_VERDICT_JSON = re.compile(r'"verdict"\s*:\s*"(CORRECT|WRONG|INCORRECT)"', re.IGNORECASE)
_VERDICT_WORD = re.compile(r"\b(CORRECT|WRONG|INCORRECT)\b")
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def answer_messages(question: str, memory_text: str) -> list[dict[str, str]]:
    """The answer model's chat: memory notes (what the inlet injected) and the question."""
    notes = memory_text.strip() or "(no memory notes)"
    return [
        {
            "role": "system",
            "content": f"{ANSWER_SYSTEM}\n\n<memory_notes>\n{notes}\n</memory_notes>",
        },
        {"role": "user", "content": f"<question>{question}</question>"},
    ]


def judge_messages(question: str, gold: str, answer: str) -> list[dict[str, str]]:
    """The judge model's chat: the question, the reference and the answer to grade."""
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {
            "role": "user",
            "content": (
                f"<question>{question}</question>\n<reference_answer>{gold}</reference_answer>\n"
                f"<answer_to_grade>{answer}</answer_to_grade>"
            ),
        },
    ]


def clean_answer(text: str) -> str:
    """An answer without reasoning blocks (`<think>…</think>`, which reasoning models emit
    before the answer), stripped; what is graded and scored.
    """
    cleaned = _REASONING.sub("", text or "")
    # a reasoning block cut off by the token limit has no answer after it
    cut = re.search(r"<(think|thinking|reasoning)>", cleaned, re.IGNORECASE)
    return (cleaned[: cut.start()] if cut else cleaned).strip()


def parse_verdict(text: str) -> bool | None:
    """True for CORRECT, False for WRONG, None when the reply says neither (or both).

    A JSON `"verdict"` field wins; otherwise the reply must contain exactly one of the two
    words in capitals (a judge that rambles in lower case or hedges is unreadable).
    INCORRECT, which judges write unasked, is read as WRONG.
    """
    text = clean_answer(text)
    found = _VERDICT_JSON.search(text)
    if found:
        return found.group(1).upper() == "CORRECT"
    words = {"WRONG" if w == "INCORRECT" else w for w in _VERDICT_WORD.findall(text)}
    if len(words) != 1:
        return None
    return words == {"CORRECT"}


def normalize_answer(text: str) -> list[str]:
    """Lower case, punctuation, articles and "and" removed, split on whitespace."""
    cleaned = _ARTICLES.sub(" ", str(text).lower().translate(_PUNCTUATION))
    return cleaned.split()


def token_f1(answer: str, gold: str) -> float:
    """Harmonic mean of token precision and recall after `normalize_answer` (0.0–1.0).

    Two empty answers score 1.0; one empty answer scores 0.0.
    """
    predicted, reference = normalize_answer(answer), normalize_answer(gold)
    if not predicted or not reference:
        return float(predicted == reference)
    common = sum((Counter(predicted) & Counter(reference)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(reference)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True, slots=True)
class Match:
    """One memory matched to one fact."""

    memory: int  #: index into the memories
    fact: int  #: index into the facts
    similarity: float  #: cosine similarity


def match_memories(
    similarity: np.ndarray, threshold: float = MATCH_THRESHOLD
) -> tuple[list[Match], list[float], list[float]]:
    """Match memories (rows) to facts (columns) one-to-one, best pairs first.

    A pair is taken when both are still free and its similarity is at least `threshold`.

    Args:
        similarity: (memories, facts) cosine similarities.

    Returns:
        (the matches, each memory's best similarity to any fact, each fact's best similarity
        to any memory); the two lists are empty when the other side is empty.
    """
    rows, cols = similarity.shape
    if rows == 0 or cols == 0:
        return [], [0.0] * rows, [0.0] * cols
    order = np.argsort(-similarity, axis=None, kind="stable")
    free_rows, free_cols = set(range(rows)), set(range(cols))
    matches: list[Match] = []
    for flat in order:
        row, col = divmod(int(flat), cols)
        value = float(similarity[row, col])
        if value < threshold or not free_rows or not free_cols:
            break
        if row in free_rows and col in free_cols:
            matches.append(Match(memory=row, fact=col, similarity=round(value, 4)))
            free_rows.discard(row)
            free_cols.discard(col)
    best_per_memory = [round(float(v), 4) for v in similarity.max(axis=1)]
    best_per_fact = [round(float(v), 4) for v in similarity.max(axis=0)]
    return matches, best_per_memory, best_per_fact


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def summarize_answers(answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per category (1–4) and overall: questions, judged correct, accuracy, mean token F1,
    mean context tokens, unanswered (the answer model failed) and unreadable verdicts.

    Each answer record has `category`, `correct` (bool), `f1`, `context_tokens`, `answer_error`
    (None or a reason) and `verdict_unreadable` (bool).
    """

    def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        n = len(rows)
        correct = sum(bool(r["correct"]) for r in rows)
        return {
            "n": n,
            "correct": correct,
            "accuracy": _share(correct, n),
            "f1": round(sum(float(r["f1"]) for r in rows) / n, 4) if n else None,
            "context_tokens": round(sum(int(r["context_tokens"]) for r in rows) / n, 1)
            if n
            else None,
            "unanswered": sum(r.get("answer_error") is not None for r in rows),
            "verdict_unreadable": sum(bool(r.get("verdict_unreadable")) for r in rows),
        }

    return {
        "by_category": {
            str(category): {
                "name": CATEGORY_NAMES[category],
                **summary([a for a in answers if a["category"] == category]),
            }
            for category in QA_CATEGORIES
        },
        "overall": summary(answers),
    }


def verdict_json(correct: bool) -> str:
    """The judge reply a well-behaved judge gives (used by the stand-in)."""
    return json.dumps({"verdict": "CORRECT" if correct else "WRONG"})
