"""Scripted extraction answers written the way real small models wrote them.

The stand-in's well-formed answers (`testkit.extraction_replies`) are what the prompt asks
for; these are what Qwen2.5-Coder-1.5B and SmolLM2-135M answered to the same prompt
(../shared/notes/local-llm.md, main 408e3d2) and what small models do besides. Each class:

- `placeholder_op`: `"op": "NEW|UPDATE"`, the prompt's alternatives copied literally;
- `message_ref_update`: an UPDATE whose `ref` is a new message's ref (`"u1"`);
- `verbatim`: the user's whole message, in the first person, as the fact (and, as Qwen
  did, in the wrong bank and with `"NEW|UPDATE"`);
- `synonym_op`: a lower-case or other op name ("add", "modify", "create");
- `wrong_bank`: a bank by a near name ("Personal Info") or one the chat may not write;
- NEW for UPDATE, paraphrases and a wrong UPDATE target: ordinary operations
  (`extraction_replies.new_op`) with the op and ref a careless model picks;
- `with_prose`, `in_fence`, `truncated`: the JSON wrapped in chatter, in a code fence, or
  cut off mid-item;
- `invented_keys`: SmolLM2's `{"operations": []}` plus keys of its own.

`sloppy_by_message` answers like `extraction_replies.by_message`, then wraps the JSON.
`RECORDED` holds answers the local Qwen2.5-1.5B server gave to this prompt, verbatim, and
`replaying` answers with one of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from testkit.extraction_replies import new_user_messages

__all__ = [
    "CLASSES",
    "RECORDED",
    "in_fence",
    "invented_keys",
    "message_ref_update",
    "placeholder_op",
    "ref_of",
    "replaying",
    "sloppy_by_message",
    "synonym_op",
    "truncated",
    "verbatim",
    "with_prose",
    "wrong_bank",
]

CLASSES = (
    "placeholder_op",
    "message_ref_as_memory_ref",
    "first_person_verbatim",
    "wrong_bank",
    "synonym_op",
    "new_for_update",
    "paraphrase",
    "wrong_update_target",
    "fact_from_assistant_reply",
    "prose_around_json",
    "code_fence",
    "truncated_json",
    "invented_keys",
)
"""Every class of sloppy answer these helpers script (the integration tests replay each)."""


def _op(content: str, **fields: Any) -> dict[str, Any]:
    return {
        "op": "NEW",
        "ref": None,
        "content": content,
        "tags": [],
        "bank": "personal",
        "confidence": 0.9,
        "source": "stated",
        **fields,
    }


def placeholder_op(content: str, *, ref: str | None = None, **fields: Any) -> dict[str, Any]:
    """An operation whose op is the prompt's alternatives: `"NEW|UPDATE"`."""
    return _op(content, op="NEW|UPDATE", ref=ref, **fields)


def message_ref_update(content: str, *, message: str = "u1", **fields: Any) -> dict[str, Any]:
    """An UPDATE that names the new message (`"u1"`) as the memory it changes."""
    return _op(content, op="UPDATE", ref=message, message=message, **fields)


def verbatim(message_text: str, *, message: str = "u1") -> dict[str, Any]:
    """Qwen2.5-1.5B's answer: the whole message, first person, NEW|UPDATE, a message ref as
    ref and the wrong bank.
    """
    return _op(
        message_text,
        op="NEW|UPDATE",
        ref=message,
        message=message,
        bank="interaction_patterns",
        tags=["identity"],
    )


def synonym_op(content: str, op: str = "add", **fields: Any) -> dict[str, Any]:
    """An operation with another op name ("add", "modify", "create", "new" in lower case)."""
    return _op(content, op=op, **fields)


def wrong_bank(content: str, bank: str = "Personal Info", **fields: Any) -> dict[str, Any]:
    """An operation in a bank given by a near name, or one the chat may not write."""
    return _op(content, bank=bank, **fields)


def with_prose(answer: str) -> str:
    """The JSON between chatter, as chat-tuned models answer without JSON mode."""
    return f"Sure! Here are the memory operations for this conversation:\n{answer}\nLet me know!"


def in_fence(answer: str) -> str:
    """The JSON in a Markdown code fence."""
    return f"```json\n{answer}\n```"


def truncated(answer: str) -> str:
    """The JSON cut off in the middle of its last operation (the model ran out of tokens)."""
    cut = answer.rfind('"content"')
    return answer[: cut + len('"content": "Us')] if cut != -1 else answer[: len(answer) // 2]


def invented_keys() -> str:
    """SmolLM2-135M's answer: an empty list and keys of its own."""
    return json.dumps(
        {
            "operations": [],
            "user_name": "the user",
            "memory": {"facts": "none"},
            "response": "I have noted your message.",
        }
    )


_SHOWN = re.compile(r"^\[(m\d+)\] \([^)]*\) (.*)$", re.MULTILINE)


def ref_of(request: dict[str, Any], content: str) -> str | None:
    """The short ref under which the request shows the memory `content` (None: not shown)."""
    prompt = str((request.get("messages") or [{}])[-1].get("content", ""))
    return next((m.group(1) for m in _SHOWN.finditer(prompt) if m.group(2) == content), None)


Rule = list[dict[str, Any]] | Callable[[dict[str, Any]], list[dict[str, Any]]]
"""The operations answered to a message: a list, or made from the request (to aim at a
shown memory's ref, `ref_of`)."""


def sloppy_by_message(
    rules: dict[str, Rule], *, wrap: Callable[[str], str] = in_fence
) -> Callable[[dict[str, Any]], str]:
    """Answer, for each new user message of the request, `rules[k]` for the first key k in
    it (operations keep the `message` they were given, or get the message's ref), the JSON
    wrapped by `wrap` (or the rule's own text when a rule answers a string under "raw").
    Requests with no matching message answer `{"operations": []}`.
    """

    def respond(request: dict[str, Any]) -> str:
        operations: list[dict[str, Any]] = []
        for ref, text in new_user_messages(request):
            for needle, rule in rules.items():
                if needle in text:
                    ops = rule(request) if callable(rule) else rule
                    operations += [op if "message" in op else {"message": ref, **op} for op in ops]
                    break
        return wrap(json.dumps({"operations": operations}, ensure_ascii=False))

    return respond


RECORDED: dict[str, dict[str, Any]] = {
    # Qwen2.5-Coder-1.5B-Instruct Q4_K_M, llama-cpp-python 0.3.36, schema_object mode, the
    # prompt of service/core/extraction.py, 2026-12-04 (209 s): NEW where an UPDATE of the
    # employer belonged, the sister's fact missed
    "new_job_as_new": {
        "shown": ["User works at Falcon Logistics"],
        "messages": [
            (
                "I finally adopted a dog last weekend, a rescue greyhound called Biscuit.",
                "Congratulations! Greyhounds are gentle.",
            ),
            (
                "Also I start at Heron Freight on Monday as a dispatcher. My sister Oona hates "
                "dogs though, so visits will be fun.",
                "Good luck with the new job!",
            ),
        ],
        "answer": {
            "operations": [
                {
                    "op": "NEW",
                    "ref": None,
                    "message": "u1",
                    "content": "User adopted a dog Biscuit last weekend",
                    "tags": ["possession"],
                    "bank": "personal",
                    "confidence": 0.95,
                    "source": "stated",
                },
                {
                    "op": "NEW",
                    "ref": None,
                    "message": "u2",
                    "content": "User starts at Heron Freight on Monday as a dispatcher",
                    "tags": ["identity", "goal"],
                    "bank": "personal",
                    "confidence": 0.95,
                    "source": "stated",
                },
            ]
        },
    },
    # the same model and mode (138 s): a one-off request as a habit, an unchanged UPDATE of
    # an unrelated memory, the jazz change missed
    "unrelated_update": {
        "shown": ["User loves jazz", "User works at Heron Freight"],
        "messages": [
            (
                "What should I cook tonight? Something quick.",
                "How about a mushroom risotto or a Thai green curry?",
            ),
            (
                "Honestly I can't stand jazz anymore, my neighbour plays it all day.",
                "That sounds frustrating.",
            ),
        ],
        "answer": {
            "operations": [
                {
                    "op": "NEW",
                    "ref": None,
                    "message": "u1",
                    "content": "User cooks quickly",
                    "tags": ["goal"],
                    "bank": "interaction_patterns",
                    "confidence": 0.9,
                    "source": "stated",
                },
                {
                    "op": "UPDATE",
                    "ref": "@User works at Heron Freight",
                    "message": "u2",
                    "content": "User works at Heron Freight",
                    "tags": ["identity"],
                    "bank": "personal",
                    "confidence": 0.85,
                    "source": "stated",
                },
            ]
        },
    },
}
"""Answers the local Qwen2.5-1.5B server gave to the product's extraction prompt, verbatim;
a `ref` "@<text>" stands for the ref under which the replay shows that memory."""


def replaying(name: str) -> Callable[[dict[str, Any]], str]:
    """Answer every extraction request with the recorded answer `name`, its "@<text>" refs
    resolved against the memories the request shows (`ref_of`).
    """
    recorded = RECORDED[name]["answer"]

    def respond(request: dict[str, Any]) -> str:
        ops = [
            {**op, "ref": ref_of(request, op["ref"][1:])}
            if isinstance(op.get("ref"), str) and op["ref"].startswith("@")
            else op
            for op in recorded["operations"]
        ]
        return json.dumps({"operations": ops}, ensure_ascii=False)

    return respond
