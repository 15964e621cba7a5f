"""Pure pieces of `bench.h2h_openwebui`: the run's journal, the memory-correctness rule and
the aggregation of the results. No I/O beyond the journal file; no model, no Open WebUI.

The memory rule (deterministic; vectors are all-MiniLM-L6-v2, L2-normalised):

- **correct**: the memory's cosine similarity to some LoCoMo observation fact of the replayed
  sessions (either speaker) is at least `FACT_THRESHOLD` (0.75, `bench.eval_scoring.
  MATCH_THRESHOLD`, measured there on reworded LoCoMo facts: 0.76–0.98 against their own fact);
- **grounded**: not correct, but at least `FACT_THRESHOLD` similar to one sentence of a
  dialogue turn of the replayed sessions (`turn_sentences`): it restates something said
  without being one of the dataset's facts (small talk, a paraphrase of a line), neither
  confirmed nor contradicted;
- **wrong**: neither: nothing in the replayed sessions says it (an invention, a confusion of
  who said what, or a memory about the model's own reply);
- **duplicate** (counted on top): it matches (≥ `FACT_THRESHOLD`) the same fact as an earlier
  memory of the same arm, or its cosine to an earlier memory is at least
  `DUPLICATE_THRESHOLD` (0.90).

Before embedding, "User" / "the user" in a memory is replaced by the speaker's name
(`name_the_user`): memory writers say "User adopted…", LoCoMo's facts say "Audrey adopted…",
and the name alone would otherwise cost the cosine some 0.1.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.eval_scoring import MATCH_THRESHOLD

__all__ = [
    "DUPLICATE_THRESHOLD",
    "FACT_THRESHOLD",
    "Journal",
    "label_memories",
    "memory_counts",
    "name_the_user",
    "render_markdown",
    "summarize_answers",
    "turn_sentences",
]

FACT_THRESHOLD = MATCH_THRESHOLD
DUPLICATE_THRESHOLD = 0.90

_THE_USER = re.compile(r"\b(?:the user|user)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def name_the_user(text: str, speaker: str) -> str:
    """`text` with "User" / "the user" (any case, also before "'s") replaced by `speaker`."""
    return _THE_USER.sub(speaker, text)


def turn_sentences(turns: Iterable[str]) -> list[str]:
    """The sentences of the turns (split after . ! or ? and white space), empty ones left out."""
    return [part.strip() for turn in turns for part in _SENTENCE_END.split(turn) if part.strip()]


class Journal:
    """The run's per-step records, one JSON object a line, appended as each step ends.

    A step is identified by its `key` (e.g. "A/turn/D1:3"); a rerun skips the keys already
    written, so an interrupted run resumes after the last finished step. A last line cut off
    by a crash is ignored (its step runs again).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("key"), str):
                    self.records[record["key"]] = record

    def done(self, key: str) -> bool:
        return key in self.records

    def get(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)

    def add(self, key: str, **fields: Any) -> dict[str, Any]:
        """Write one finished step (overwrites an earlier record of the same key on reading)."""
        record = {"key": key, **fields}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.records[key] = record
        return record

    def with_prefix(self, prefix: str) -> list[dict[str, Any]]:
        """Records whose key starts with `prefix`, in the order they were first written."""
        return [r for k, r in self.records.items() if k.startswith(prefix)]


def label_memories(
    memories: np.ndarray, facts: np.ndarray, turns: np.ndarray
) -> list[dict[str, Any]]:
    """Label each memory (row of `memories`, in storage order) by the rule of this module.

    Args:
        memories: (m, d) unit vectors of the stored memories, oldest first.
        facts: (f, d) unit vectors of the observation facts of the replayed sessions.
        turns: (t, d) unit vectors of the replayed dialogue turns.

    Returns:
        one dict a memory: `label` ("correct", "grounded" or "wrong"), `fact` (index of the
        best fact when correct, else None), `fact_similarity`, `turn_similarity`,
        `duplicate` (bool).
    """
    labels: list[dict[str, Any]] = []
    if len(memories) == 0:
        return labels
    to_facts = memories @ facts.T if len(facts) else np.zeros((len(memories), 0))
    to_turns = memories @ turns.T if len(turns) else np.zeros((len(memories), 0))
    to_memories = memories @ memories.T
    claimed: set[int] = set()
    for row in range(len(memories)):
        best_fact = int(np.argmax(to_facts[row])) if to_facts.shape[1] else None
        fact_similarity = float(to_facts[row, best_fact]) if best_fact is not None else 0.0
        turn_similarity = float(to_turns[row].max()) if to_turns.shape[1] else 0.0
        if fact_similarity >= FACT_THRESHOLD:
            label, fact = "correct", best_fact
        elif turn_similarity >= FACT_THRESHOLD:
            label, fact = "grounded", None
        else:
            label, fact = "wrong", None
        near_earlier = bool(row) and float(to_memories[row, :row].max()) >= DUPLICATE_THRESHOLD
        duplicate = near_earlier or (fact is not None and fact in claimed)
        if fact is not None:
            claimed.add(fact)
        labels.append(
            {
                "label": label,
                "fact": fact,
                "fact_similarity": round(fact_similarity, 4),
                "turn_similarity": round(turn_similarity, 4),
                "duplicate": duplicate,
            }
        )
    return labels


def memory_counts(labels: Sequence[Mapping[str, Any]], facts_total: int) -> dict[str, Any]:
    """Counts of `label_memories` output, and how many distinct facts the memories cover."""
    covered = {label["fact"] for label in labels if label.get("fact") is not None}
    return {
        "stored": len(labels),
        "correct": sum(label["label"] == "correct" for label in labels),
        "grounded": sum(label["label"] == "grounded" for label in labels),
        "wrong": sum(label["label"] == "wrong" for label in labels),
        "duplicates": sum(bool(label["duplicate"]) for label in labels),
        "facts_covered": len(covered),
        "facts_total": facts_total,
    }


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return round(statistics.fmean(items), 3) if items else None


def _median(values: Iterable[float]) -> float | None:
    items = list(values)
    return round(statistics.median(items), 3) if items else None


def summarize_answers(
    answers: Sequence[Mapping[str, Any]], baseline: str = "none"
) -> dict[str, dict[str, Any]]:
    """Per arm: questions, judged correct, unreadable verdicts, injected size, times.

    Each answer record has `arm`, `question` (an id), `correct` (True/False/None when the
    judge's verdict was unreadable), `injected_chars`, `injected_tokens`, `ttft_s` (client
    send → the model's first token), `pre_model_s` (client send → Open WebUI's request to the
    model). `ttft_added_s` is the mean, over the questions both arms answered, of this arm's
    `ttft_s` minus the `baseline` arm's.
    """
    by_arm: dict[str, list[Mapping[str, Any]]] = {}
    for answer in answers:
        by_arm.setdefault(str(answer["arm"]), []).append(answer)
    base = {a["question"]: a for a in by_arm.get(baseline, [])}
    summary: dict[str, dict[str, Any]] = {}
    for arm, rows in by_arm.items():
        judged = [r for r in rows if r.get("correct") is not None]
        correct = sum(bool(r["correct"]) for r in judged)
        ttfts = [float(r["ttft_s"]) for r in rows if r.get("ttft_s") is not None]
        paired = [
            float(r["ttft_s"]) - float(base[r["question"]]["ttft_s"])
            for r in rows
            if r.get("ttft_s") is not None
            and r["question"] in base
            and base[r["question"]].get("ttft_s") is not None
        ]
        summary[arm] = {
            "n": len(rows),
            "correct": correct,
            "unreadable": len(rows) - len(judged),
            "accuracy": round(correct / len(rows), 4) if rows else None,
            "injected_chars_mean": _mean(float(r["injected_chars"]) for r in rows),
            "injected_tokens_mean": _mean(float(r["injected_tokens"]) for r in rows),
            "ttft_s_median": _median(ttfts),
            "ttft_s_mean": _mean(ttfts),
            "pre_model_s_median": _median(
                float(r["pre_model_s"]) for r in rows if r.get("pre_model_s") is not None
            ),
            "ttft_added_s_mean": _mean(paired) if arm != baseline else 0.0,
            "ttft_added_pairs": len(paired) if arm != baseline else len(rows),
        }
    return summary


ARM_NAMES = {
    "none": "no memory (built-in off, no filter)",
    "builtin": "Open WebUI built-in memory + background review",
    "ours": "this product's filter (built-in off)",
}


def render_markdown(results: Mapping[str, Any]) -> str:
    """The summary table of a run (results as `bench.h2h_openwebui` writes them)."""
    lines = [
        "# End to end with a real model: Open WebUI's built-in memory vs this product",
        "",
        f"Command: `{results['command']}`",
        "",
        f"Model: {results['model']} (chat model, built-in review model, this product's "
        "extraction model and the judge). "
        f"Data: LoCoMo {results['conversation']}, sessions {results['sessions']}, "
        f"user = {results['speaker']} ({results['turns']} user turns), "
        f"{results['questions']} questions. Review interval: {results['review_interval']} "
        "user turns.",
        "",
        "## Memories stored after the replay",
        "",
        "| arm | stored | correct | grounded | wrong | duplicates | facts covered |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, counts in results["memories"].items():
        lines.append(
            f"| {ARM_NAMES.get(arm, arm)} | {counts['stored']} | {counts['correct']} | "
            f"{counts['grounded']} | {counts['wrong']} | {counts['duplicates']} | "
            f"{counts['facts_covered']}/{counts['facts_total']} |"
        )
    lines += [
        "",
        "## Answers in new (temporary) chats",
        "",
        "| arm | n | judged correct | unreadable verdicts | injected chars | injected tokens "
        "| TTFT median s | pre-model median s | TTFT added vs none, mean s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, row in results["answers"].items():
        lines.append(
            f"| {ARM_NAMES.get(arm, arm)} | {row['n']} | {row['correct']} | "
            f"{row['unreadable']} | {row['injected_chars_mean']} | {row['injected_tokens_mean']} "
            f"| {row['ttft_s_median']} | {row['pre_model_s_median']} | "
            f"{row['ttft_added_s_mean']} ({row['ttft_added_pairs']} pairs) |"
        )
    lines += ["", *(f"- {note}" for note in results.get("notes", []))]
    return "\n".join(lines) + "\n"
