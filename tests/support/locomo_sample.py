"""A tiny conversation in the shape of LoCoMo's `locomo10.json` (our own text, not the data set's),
for tests of the LoCoMo tools: two speakers, two sessions, nine user turns when both speakers
are replayed, seven observation facts, five questions of categories 1–4 and one of category 5.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["FACTS", "QUESTIONS", "TURNS", "sample", "write_sample"]

#: user turns when each speaker in turn is the user (Ada 4, Ben 5)
TURNS = 9
#: observation facts (Ada 4, Ben 3)
FACTS = 7
#: questions of categories 1–4 (category 4 twice)
QUESTIONS = 5


def sample(sample_id: str = "conv-test") -> dict[str, Any]:
    """One LoCoMo-shaped sample."""
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Ben",
            "session_1_date_time": "10:00 am on 3 March, 2024",
            "session_1": [
                {
                    "speaker": "Ada",
                    "dia_id": "D1:1",
                    "text": "Hi Ben! I finally adopted a dog last week, a beagle called Pixel.",
                },
                {
                    "speaker": "Ben",
                    "dia_id": "D1:2",
                    "text": "Congrats! Meanwhile I just started learning the cello.",
                },
                {
                    "speaker": "Ada",
                    "dia_id": "D1:3",
                    "text": "Nice. I work as a nurse at the city hospital, night shifts mostly.",
                },
                {
                    "speaker": "Ben",
                    "dia_id": "D1:4",
                    "text": "That sounds tiring. My sister lives in Lisbon, she is a nurse too.",
                },
            ],
            "session_2_date_time": "4:30 pm on 20 April, 2024",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "How is Pixel doing these days?"},
                {
                    "speaker": "Ada",
                    "dia_id": "D2:2",
                    "text": "Great! And I ran my first half marathon on Sunday.",
                },
                {
                    "speaker": "Ben",
                    "dia_id": "D2:3",
                    "text": "Impressive. I played my first cello concert yesterday.",
                },
                {
                    "speaker": "Ada",
                    "dia_id": "D2:4",
                    "text": "Wow. Big news from me: I am moving to Porto in June.",
                },
                {"speaker": "Ben", "dia_id": "D2:5", "text": "Porto is lovely, you will like it."},
            ],
        },
        "observation": {
            "session_1_observation": {
                "Ada": [
                    ["Ada adopted a beagle named Pixel.", "D1:1"],
                    ["Ada works night shifts as a nurse at the city hospital.", "D1:3"],
                ],
                "Ben": [
                    ["Ben started learning the cello.", "D1:2"],
                    ["Ben's sister lives in Lisbon and works as a nurse.", "D1:4"],
                ],
            },
            "session_2_observation": {
                "Ada": [
                    ["Ada ran her first half marathon.", "D2:2"],
                    ["Ada is moving to Porto in June.", "D2:4"],
                ],
                "Ben": [["Ben played his first cello concert.", "D2:3"]],
            },
        },
        "qa": [
            {
                "question": "What is the name of Ada's dog?",
                "answer": "Pixel",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "When did Ada adopt her dog?",
                "answer": "late February 2024",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {
                "question": "Which instrument did Ben perform with?",
                "answer": "cello",
                "evidence": ["D1:2", "D2:3"],
                "category": 1,
            },
            {
                "question": "Would Ada likely enjoy long-distance running?",
                "answer": "Yes",
                "evidence": ["D2:2"],
                "category": 3,
            },
            {
                "question": "Where does Ada's sister live?",
                "adversarial_answer": "Lisbon",
                "evidence": ["D1:4"],
                "category": 5,
            },
            {
                "question": "Where is Ada moving?",
                "answer": "Porto",
                "evidence": ["D2:4"],
                "category": 4,
            },
        ],
    }


def write_sample(path: Path, sample_id: str = "conv-test") -> Path:
    """Write a one-sample LoCoMo file to `path`; returns `path`."""
    path.write_text(json.dumps([sample(sample_id)], ensure_ascii=False), encoding="utf-8")
    return path
