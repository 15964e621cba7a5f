"""The complete operations of an answer that was cut off (the model ran out of tokens)."""

from __future__ import annotations

from typing import Any

import json_repair

from service.errors import ExtractionOutputInvalid


def salvage_truncated(text: str) -> Any:
    """The complete items of a truncated JSON answer: `{key: [items…]}`.

    The answer is repaired with json-repair and the last item of its first list is dropped:
    that is the one the cut went through (a cut between two items costs one complete item,
    never yields a cut-off fact). Used after the repair retry, when asking again did not
    help (`decode_json_answer` said "truncated").

    Raises:
        ExtractionOutputInvalid: nothing repairable, or no item complete before the cut.
    """
    start = text.find("{")
    if start == -1:
        raise ExtractionOutputInvalid("the truncated answer holds no JSON object")
    try:
        data = json_repair.loads(text[start:])
    except Exception as exc:
        raise ExtractionOutputInvalid(f"the truncated answer is not repairable: {exc}") from exc
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, list) and len(value) > 1:
                return {key: value[:-1]}
    # nothing complete before the cut: the turn fails visibly rather than "done, 0 facts"
    raise ExtractionOutputInvalid("the answer is truncated before its first complete item")
