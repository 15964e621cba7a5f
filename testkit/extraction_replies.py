"""Scripted answers of the LLM stand-in for extraction requests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from testkit.llm_stub import Responder, StubReply

FACT = re.compile(r"\b(fact-[a-z0-9-]+)\b")
"""The token `echo_fact` looks for: a user message naming `fact-7` becomes one memory."""

_NEW_MESSAGE = re.compile(r"<new_user_message>(.*?)</new_user_message>", re.DOTALL)
_NEW_MESSAGE_WITH_REF = re.compile(
    r"^\[(u\d+)\][^\n]*\n<new_user_message>(.*?)</new_user_message>", re.DOTALL | re.MULTILINE
)


def _prompt(request: dict[str, Any]) -> str:
    return str((request.get("messages") or [{}])[-1].get("content", ""))


def new_user_message(request: dict[str, Any]) -> str:
    """The first new user message quoted in an extraction request ("" for other requests)."""
    found = _NEW_MESSAGE.search(_prompt(request))
    return found.group(1) if found else ""


def new_user_messages(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(ref, text) of every new user message of an extraction request, in order."""
    return [(m.group(1), m.group(2)) for m in _NEW_MESSAGE_WITH_REF.finditer(_prompt(request))]


def is_chat_summary_request(request: dict[str, Any]) -> bool:
    """True for a rolling chat summary request (`service/core/chat_summary.py`)."""
    return "<chat_summary>" in _prompt(request)


def new_op(
    content: str,
    *,
    bank: str = "personal",
    tags: list[str] | None = None,
    op: str = "NEW",
    ref: str | None = None,
    confidence: float = 0.9,
) -> dict[str, Any]:
    """One operation of the extraction answer."""
    return {
        "op": op,
        "ref": ref,
        "content": content,
        "tags": tags or [],
        "bank": bank,
        "confidence": confidence,
    }


def by_message(rules: dict[str, list[dict[str, Any]]]) -> Callable[[dict[str, Any]], str]:
    """Answer, for each new user message of the request, `rules[k]` for the first key k
    found in it, each operation naming its message (`"message": "u2"`).
    """

    def respond(request: dict[str, Any]) -> str:
        operations: list[dict[str, Any]] = []
        for ref, message in new_user_messages(request):
            for needle, ops in rules.items():
                if needle in message:
                    operations += [{**op, "message": ref} for op in ops]
                    break
        return json.dumps({"operations": operations}, ensure_ascii=False)

    return respond


def in_sequence(answers: Sequence[str | StubReply]) -> Responder:
    """Answer with `answers` in order (texts, or `StubReply` errors and delays), then repeat
    the last one.
    """
    it: Iterator[str | StubReply] = iter(answers)
    last = {"value": answers[-1]}

    def respond(_: dict[str, Any]) -> str | StubReply:
        last["value"] = next(it, last["value"])
        return last["value"]

    return respond


_PREVIOUS_SUMMARY = re.compile(r"<chat_summary>(.*?)</chat_summary>", re.DOTALL)
_SUMMARY_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2}\] ([^:\n]+): (.*)$", re.MULTILINE)


def chat_summary_lines(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(speaker, text) of the new messages of a rolling summary request, in order."""
    block = _prompt(request).split("<new_messages>", 1)[-1]
    return [(m.group(1), m.group(2)) for m in _SUMMARY_LINE.finditer(block)]


def chat_summary_answer(request: dict[str, Any]) -> str:
    """A summary answer: the summary so far, then "<speaker>: <text>" for each new user
    message (replies left out), joined by spaces, so tests see what each version took in.
    """
    previous = _PREVIOUS_SUMMARY.search(_prompt(request))
    parts = [previous.group(1)] if previous and previous.group(1) else []
    parts += [
        f"{speaker}: {text}"
        for speaker, text in chat_summary_lines(request)
        if speaker != "assistant"
    ]
    return json.dumps({"summary": " ".join(parts)}, ensure_ascii=False)


def with_chat_summaries(
    extraction: Callable[[dict[str, Any]], str],
) -> Callable[[dict[str, Any]], str]:
    """Answer summary requests with `chat_summary_answer` and the rest with `extraction`."""

    def respond(request: dict[str, Any]) -> str:
        if is_chat_summary_request(request):
            return chat_summary_answer(request)
        return extraction(request)

    return respond


def echo_fact(request: dict[str, Any]) -> str:
    """Extraction answer naming the `fact-…` token of each new user message as one memory."""
    ops = [
        {**new_op(f"User mentioned {found.group(1)}"), "message": ref}
        for ref, text in new_user_messages(request)
        if (found := FACT.search(text))
    ]
    return json.dumps({"operations": ops})
