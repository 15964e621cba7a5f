"""Scripted answers of the LLM stand-in for extraction requests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

_NEW_MESSAGE = re.compile(r"<new_user_message>(.*?)</new_user_message>", re.DOTALL)


def new_user_message(request: dict[str, Any]) -> str:
    """The new user message quoted in an extraction request ("" for other requests)."""
    text = str((request.get("messages") or [{}])[-1].get("content", ""))
    found = _NEW_MESSAGE.search(text)
    return found.group(1) if found else ""


def new_op(content: str, *, bank: str = "personal", tags: list[str] | None = None,
           op: str = "NEW", ref: str | None = None, confidence: float = 0.9) -> dict[str, Any]:
    """One operation of the extraction answer."""
    return {"op": op, "ref": ref, "content": content, "tags": tags or [], "bank": bank,
            "confidence": confidence}


def by_message(rules: dict[str, list[dict[str, Any]]]) -> Callable[[dict[str, Any]], str]:
    """Answer `{"operations": rules[k]}` for the first key k found in the new user message."""

    def respond(request: dict[str, Any]) -> str:
        message = new_user_message(request)
        for needle, ops in rules.items():
            if needle in message:
                return json.dumps({"operations": ops}, ensure_ascii=False)
        return json.dumps({"operations": []})

    return respond


def in_sequence(answers: list[str]) -> Callable[[dict[str, Any]], str]:
    """Answer with `answers` in order, then repeat the last one."""
    it: Iterator[str] = iter(answers)
    last = {"value": answers[-1]}

    def respond(_: dict[str, Any]) -> str:
        last["value"] = next(it, last["value"])
        return last["value"]

    return respond
