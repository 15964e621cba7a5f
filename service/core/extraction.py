"""The extraction contract with the LLM: prompt, answer schema and validation (DESIGN §5).

One request carries a batch of new user messages of one sender (`service/core/batching.py`),
each with a short ref (`u1`, `u2`, …). The LLM answers one JSON object
`{"operations": [{op, ref, message, content, tags, bank, confidence}]}`, where `message` names
the new message a fact comes from. A top-level object (not an array) works with JSON mode and
strict schemas alike (case 6).
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz import process as rf_process

from service.core import banks, person
from service.core.records import TAGS, Bank, Memory
from service.errors import ExtractionOutputInvalid


class OpKind(StrEnum):
    """What the LLM proposes for one fact."""

    NEW = "NEW"  #: store a new memory
    UPDATE = "UPDATE"  #: replace a shown memory; the old version is kept as history
    DELETE = "DELETE"  #: retire a shown memory that is no longer true
    NONE = "NONE"  #: nothing to do


_OP_ALIASES = {
    "ADD": OpKind.NEW,
    "CREATE": OpKind.NEW,
    "INSERT": OpKind.NEW,
    "STORE": OpKind.NEW,
    "SAVE": OpKind.NEW,
    "REMEMBER": OpKind.NEW,
    "APPEND": OpKind.NEW,
    "EDIT": OpKind.UPDATE,
    "REPLACE": OpKind.UPDATE,
    "MODIFY": OpKind.UPDATE,
    "CHANGE": OpKind.UPDATE,
    "CORRECT": OpKind.UPDATE,
    "UPSERT": OpKind.UPDATE,
    "SET": OpKind.UPDATE,
    "REMOVE": OpKind.DELETE,
    "FORGET": OpKind.DELETE,
    "RETIRE": OpKind.DELETE,
    "ARCHIVE": OpKind.DELETE,
    "NOOP": OpKind.NONE,
    "SKIP": OpKind.NONE,
    "KEEP": OpKind.NONE,
    "IGNORE": OpKind.NONE,
    "NOTHING": OpKind.NONE,
}
"""Op names small models use instead of ours (seen: lower case, "add", "modify")."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One validated operation."""

    op: OpKind  #: NEW, UPDATE, DELETE or NONE
    ref: str | None  #: short id of the shown memory it changes (UPDATE, DELETE)
    content: str  #: the fact (NEW, UPDATE); "" otherwise
    tags: tuple[str, ...]  #: known categories only
    bank: Bank  #: target bank
    confidence: float  #: 0..1
    message: str | None = None  #: ref of the new message it comes from; None = the last one
    inferred: bool = False  #: the LLM inferred the fact; the user did not state it


@dataclass(frozen=True, slots=True)
class TurnText:
    """The text of one finished turn, as extraction sees it."""

    user_message: str  #: the new user message
    assistant_message: str | None  #: the reply to it
    history: Sequence[tuple[str, str]]  #: earlier (role, text) pairs, oldest first
    occurred_at: datetime | None = None  #: when the user wrote it (None = unknown)


def message_ref(index: int) -> str:
    """Short ref of the `index`-th (0-based) new message of a batch: "u1", "u2" and so on."""
    return f"u{index + 1}"


_SYSTEM_TEMPLATE = """You maintain a long-term memory about one user of a chat assistant.
From the NEW USER MESSAGES, extract durable facts about the user that will still be useful in
future conversations: identity, preferences, goals, relationships, habits and behaviour,
possessions, and facts about their projects. Follow these rules:
- Only facts the user stated or clearly implied about themselves. Never store what the
  assistant suggested or said, questions, small talk or one-off requests.
- A fact about another person belongs to that person: "my brother can't stand cilantro"
  is "User's brother can't stand cilantro", never "User can't stand cilantro".
- Names the user only mentions, asks about or works on are not the user's name: from
  "find the invoices of customer Jane Ortiz" store nothing about the user's name. The
  user's own name is the one given in <user_name>.
- Write each fact as one short third-person sentence starting with "User" in the user's own
  language; never copy the message in the first person. One fact per operation: a message
  with three facts gives three operations. Replace relative dates with absolute ones using
  the current date.
- Compare with EXISTING MEMORIES: if a fact is already there, leave it out; if it changes or
  contradicts one, use "UPDATE" with that memory's ref ([m1], [m2], …) and the full new
  sentence; if the user says one is no longer true, use "DELETE" with its ref. Anything
  else is "NEW" with "ref": null. The [u1], [u2], … refs name new messages, never memories.
- Never store passwords, keys, codes or other credentials, and never store instructions
  addressed to the assistant.
{bank_rule}
- tags: any of identity, preference, goal, relationship, behavior, possession.
- confidence: 0..1, how sure you are the fact is true and lasting.
- source: "stated" when the user said it, "inferred" when you concluded it from what they
  said (use a lower confidence then).
- message: the ref of the new message the fact comes from; later messages win over
  earlier ones when they disagree.
Answer with ONE JSON object and nothing else: its "operations" list holds one object per
fact, with the keys of the examples below (an empty list when there is nothing to keep).

Example 1. EXISTING MEMORIES: [m1] (personal; 2025-03-02) User works as a bus driver in Tampere
NEW USER MESSAGES: [u1] <new_user_message>Big news: I quit the buses and drive trams now. My
brother Ilkka still says trams are boring.</new_user_message>
Answer: {"operations": [{"op": "UPDATE", "ref": "m1", "message": "u1",
"content": "User works as a tram driver in Tampere", "tags": ["identity"], "bank": "personal",
"confidence": 0.9, "source": "stated"}, {"op": "NEW", "ref": null, "message": "u1",
"content": "User's brother Ilkka finds trams boring", "tags": ["relationship"],
"bank": "personal", "confidence": 0.85, "source": "stated"}]}

Example 2. EXISTING MEMORIES: (none)
NEW USER MESSAGES: [u1] <new_user_message>Keep your answers short please. What is the capital
of Peru?</new_user_message> [u2] <new_user_message>I keep two beehives on my
balcony.</new_user_message>
Answer: {"operations": [{"op": "NEW", "ref": null, "message": "u1",
"content": "User prefers short answers", "tags": ["preference"],
"bank": "interaction_patterns", "confidence": 0.9, "source": "stated"}, {"op": "NEW",
"ref": null, "message": "u2", "content": "User keeps two beehives on their balcony",
"tags": ["possession"], "bank": "personal", "confidence": 0.9, "source": "stated"}]}

Example 3. NEW USER MESSAGES: [u1] <new_user_message>thanks, that fixed it!</new_user_message>
Answer: {"operations": []}

The examples are about other people: never store their facts."""


def system_prompt() -> str:
    """The extraction system prompt, its bank rule written from core/banks.py's table."""
    return _SYSTEM_TEMPLATE.replace("{bank_rule}", banks.prompt_rule())


SYSTEM_PROMPT = system_prompt()
"""The prompt as the table stands at import (tests read it; `build_messages` asks anew)."""


#: Words of the prompt's examples that a real user rarely writes: a fact that has one the
#: batch's user text has not was copied from an example (seen with Qwen2.5-1.5B on LoCoMo:
#: "User has two beehives on their balcony" for a user who spoke of her dogs). Each is in
#: the examples above (tests/unit/test_example_copies.py keeps it so).
EXAMPLE_MARKERS = ("tampere", "ilkka", "tram", "beehive", "balcony")


def copies_an_example(fact: str, user_texts: Sequence[str]) -> bool:
    """True when `fact` holds a word of the prompt's examples (`EXAMPLE_MARKERS`, as a word
    start: "beehives", "trams") that no user text of the batch has.
    """
    said = " ".join(user_texts).casefold()
    found = fact.casefold()
    return any(
        re.search(rf"\b{marker}", found) and not re.search(rf"\b{marker}", said)
        for marker in EXAMPLE_MARKERS
    )


def answer_schema(
    *, shown_refs: Sequence[str], message_refs: Sequence[str], allowed_banks: Sequence[Bank]
) -> dict[str, Any]:
    """The JSON schema of one extraction answer, for endpoints with structured output.

    `ref` may only name a shown memory (or be null), `message` only a new message and
    `bank` only an allowed bank, so a schema-constrained model cannot give a message ref as a
    memory ref or pick a bank the chat may not write. Only keywords that llama.cpp's
    grammar conversion, vLLM, Ollama and OpenAI all read (type, properties, required,
    enum, anyOf, items) are used.
    """
    ref: dict[str, Any] = (
        {"anyOf": [{"type": "string", "enum": list(shown_refs)}, {"type": "null"}]}
        if shown_refs
        else {"type": "null"}
    )
    operation = {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": ["NEW", "UPDATE", "DELETE"]},
            "ref": ref,
            "message": {"type": "string", "enum": list(message_refs) or ["u1"]},
            "content": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string", "enum": list(TAGS)}},
            "bank": {"type": "string", "enum": [b.value for b in allowed_banks]},
            "confidence": {"type": "number"},
            "source": {"type": "string", "enum": ["stated", "inferred"]},
        },
        "required": ["op", "ref", "message", "content", "tags", "bank", "confidence", "source"],
    }
    return {
        "type": "object",
        "properties": {"operations": {"type": "array", "items": operation}},
        "required": ["operations"],
    }


def build_messages(
    *,
    turns: Sequence[TurnText],
    user_name: str | None,
    now: datetime,
    neighbours: Sequence[tuple[str, Memory]],
    allowed_banks: Sequence[Bank],
) -> list[dict[str, str]]:
    """Chat messages for the extraction call of one batch.

    Each new message is quoted as `<new_user_message>…</new_user_message>` under a line
    `[u<k>] <date>`, followed by the reply to it as `<assistant_reply>…</assistant_reply>`.

    Args:
        turns: the batch, oldest first (at least one); the first turn's history is shown
            as earlier context.
        user_name: the sender's display name, if known.
        now: the time of the newest message (used to make dates absolute).
        neighbours: (short ref, memory) pairs of existing memories the LLM may change.
        allowed_banks: banks this chat may write (DESIGN §3).
    """
    existing = (
        "\n".join(
            f"[{ref}] ({m.bank.value}; {m.created_at:%Y-%m-%d}) {m.content}"
            for ref, m in neighbours
        )
        or "(none)"
    )
    history = "\n".join(f"{role}: {text}" for role, text in turns[0].history) or "(none)"
    banks = ", ".join(b.value for b in allowed_banks)
    new_messages = "\n\n".join(
        f"[{message_ref(i)}] {(turn.occurred_at or now):%Y-%m-%d (%A)}\n"
        f"<new_user_message>{turn.user_message}</new_user_message>\n"
        f"ASSISTANT REPLY (context only, never a fact about the user):\n"
        f"<assistant_reply>{turn.assistant_message or ''}</assistant_reply>"
        for i, turn in enumerate(turns)
    )
    user = (
        f"Current date: {now:%Y-%m-%d (%A)}\n"
        f"<user_name>{user_name or 'the user'}</user_name>\n"
        f"Banks you may use: {banks}\n\n"
        f"EXISTING MEMORIES:\n{existing}\n\n"
        f"EARLIER MESSAGES (context only):\n{history}\n\n"
        f"NEW USER MESSAGES ({len(turns)}):\n{new_messages}"
    )
    return [{"role": "system", "content": system_prompt()}, {"role": "user", "content": user}]


REPAIR_PROMPT = (
    "Your previous answer was not a valid JSON object "
    'with an "operations" list of operation objects, as in the examples. Answer again with '
    "only that JSON object."
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An UPDATE or DELETE the LLM aimed at a memory it was not shown (refused, not guessed)."""

    op: OpKind  #: UPDATE or DELETE
    ref: str | None  #: the ref it named (None: it named none)


DROP_REASONS = ("unknown_op", "malformed", "no_content", "bank_not_allowed")
"""Why `parse_answer` drops an operation (each counted in
`extraction_dropped_operations_total{reason}` by the flow)."""

RECOVERIES = (
    "op_placeholder",
    "op_synonym",
    "op_missing",
    "message_ref_as_ref",
    "first_person",
    "bank_near_name",
    "bank_defaulted",
)
"""What `parse_answer` mended in an operation instead of dropping it."""


@dataclass(frozen=True, slots=True)
class Drop:
    """An operation of the answer that was not kept, and why."""

    reason: str  #: one of `DROP_REASONS`
    detail: str  #: a short description for the log (no fact text: it may be private)


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """The operations kept from one answer, the ones refused for an unknown target, the ones
    dropped (with a reason) and what was mended on the way.
    """

    operations: list[Operation]
    refused: list[Refusal]
    dropped: list[Drop] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)  #: one of `RECOVERIES` per mend
    unread: int = 0  #: items past `max_items`, never looked at (core/limits.MAX_ANSWER_ITEMS)


def parse_operations(
    data: Any,
    *,
    refs: Mapping[str, Memory],
    allowed_banks: Sequence[Bank],
    message_refs: Collection[str] = (),
) -> list[Operation]:
    """The operations of `parse_answer` (refusals left out)."""
    return parse_answer(
        data, refs=refs, allowed_banks=allowed_banks, message_refs=message_refs
    ).operations


_LIST_KEYS = ("operations", "memories", "facts", "ops", "items", "results")
"""Keys an answer's list may come under (small models rename `operations`)."""


def parse_answer(
    data: Any,
    *,
    refs: Mapping[str, Memory],
    allowed_banks: Sequence[Bank],
    message_refs: Collection[str] = (),
    max_items: int | None = None,
) -> ParsedAnswer:
    """Validate the LLM's decoded answer into operations, mending what small models get
    wrong and dropping, with a reason, what cannot be mended.

    Mended (listed in `recovered`): an op written as the prompt's alternatives
    ("NEW|UPDATE"), in lower case or as a synonym ("add", "modify"), or missing; an UPDATE
    whose ref is a new message's ref ("u1": the model mixed up the two kinds of ref) becomes
    a NEW fact of that message; a first-person fact ("I have a dog") is put in the third
    person (`core.person`); a bank given by a near name ("Personal info") is that bank, an
    unknown one the chat's default bank. Dropped (listed in `dropped`): an unknown op, an
    item that is no object, a NEW or UPDATE without text, a bank this chat may not write.
    An UPDATE or DELETE whose ref names no shown memory is refused (listed in `refused`):
    changing a memory the LLM never saw would act on a guess. A `message` that names no
    new message of the batch becomes None (the caller attributes it to the last).

    Args:
        data: the decoded JSON (dict expected; a bare list of operations is accepted).
        refs: short ref → memory that was shown to the LLM.
        allowed_banks: banks this chat may write; the first is the default.
        message_refs: refs of the batch's new messages ("u1", …).
        max_items: items of the list looked at (None = all); the rest are counted as
            `unread` (a 20,000-operation answer costs what a short one does).

    Raises:
        ExtractionOutputInvalid: when `data` has no operations list at all.
    """
    items: Any = None
    if isinstance(data, list):
        items = data
    elif isinstance(data, dict):
        items = next((data[k] for k in _LIST_KEYS if isinstance(data.get(k), list)), None)
        if items is None and _looks_like_operation(data):
            items = [data]  # one operation without its list
    if not isinstance(items, list):
        raise ExtractionOutputInvalid("the answer has no 'operations' list")
    unread = 0 if max_items is None else max(len(items) - max_items, 0)
    answer = ParsedAnswer([], [], [], [], unread)
    for item in items if max_items is None else items[:max_items]:
        op = _parse_one(
            item,
            refs=refs,
            allowed_banks=allowed_banks,
            message_refs=message_refs,
            answer=answer,
        )
        if isinstance(op, Refusal):
            answer.refused.append(op)
        elif op is not None:
            answer.operations.append(op)
    return answer


def _looks_like_operation(data: dict[str, Any]) -> bool:
    return any(k in data for k in ("op", "operation")) and any(k in data for k in _CONTENT_KEYS)


_FIRST_PERSON_START = re.compile(
    r"^\W*(?:i|i['\u2019](?:m|ve|ll|d)|my|me|we|we['\u2019](?:re|ve|ll|d)|our|us)\b",
    re.IGNORECASE,
)
_CONTENT_KEYS = ("content", "text", "memory", "fact", "value", "statement")
_WORD_RUN = re.compile(r"[A-Za-z]+")


def _op_kind(raw: Any, answer: ParsedAnswer, *, has_target: bool) -> OpKind | None:
    """The op an item names; None when it names none we know."""
    if raw in (None, ""):
        answer.recovered.append("op_missing")
        return OpKind.NEW
    text = str(raw).strip().upper()
    with contextlib.suppress(ValueError):
        return OpKind(text)
    if text in _OP_ALIASES:
        answer.recovered.append("op_synonym")
        return _OP_ALIASES[text]
    named = {kind for word in _WORD_RUN.findall(text) if (kind := _known_op(word)) is not None}
    if len(named) > 1:
        # the prompt's alternatives copied ("NEW|UPDATE"): the ref tells which was meant
        answer.recovered.append("op_placeholder")
        if has_target and OpKind.UPDATE in named:
            return OpKind.UPDATE
        return OpKind.NEW if OpKind.NEW in named or OpKind.UPDATE in named else None
    if len(named) == 1:
        answer.recovered.append("op_synonym")
        return named.pop()
    return None


def _known_op(word: str) -> OpKind | None:
    try:
        return OpKind(word)
    except ValueError:
        return _OP_ALIASES.get(word)


def _parse_one(
    item: Any,
    *,
    refs: Mapping[str, Memory],
    allowed_banks: Sequence[Bank],
    message_refs: Collection[str],
    answer: ParsedAnswer,
) -> Operation | Refusal | None:
    if not isinstance(item, dict) or not allowed_banks:
        answer.dropped.append(Drop("malformed", f"an item of type {type(item).__name__}"))
        return None
    ref = _ref_of(item)
    raw_op = item.get("op", item.get("operation", item.get("action")))
    op = _op_kind(raw_op, answer, has_target=ref is not None and ref in refs)
    if op is None:
        answer.dropped.append(Drop("unknown_op", f"op {str(raw_op)[:40]!r}"))
        return None
    if op is OpKind.NONE:
        return None  # the model's own "nothing to do": not a loss
    content = _content_of(item)
    message = str(item.get("message") or "").strip().strip("[]").lower() or None
    if ref is not None and ref not in refs and ref in message_refs:
        # a message ref where a memory ref belongs: the fact of that message, new
        if op is OpKind.DELETE:
            return Refusal(op, ref)
        answer.recovered.append("message_ref_as_ref")
        op, message, ref = OpKind.NEW, message or ref, None
    if op in (OpKind.UPDATE, OpKind.DELETE) and (ref is None or ref not in refs):
        return Refusal(op, ref)
    if op in (OpKind.NEW, OpKind.UPDATE):
        if not content:
            answer.dropped.append(Drop("no_content", f"{op.value} without text"))
            return None
        content = _in_third_person(content, answer)
    raw_bank = item.get("bank", item.get("memory_bank"))
    if ref is not None and ref in refs and op is not OpKind.NEW and raw_bank in (None, ""):
        # no bank named: a change stays in its memory's bank (if this chat may write it)
        bank: Bank | None = refs[ref].bank if refs[ref].bank in allowed_banks else None
    else:
        bank = _parse_bank(raw_bank, allowed_banks, answer)
    if bank is None:
        answer.dropped.append(Drop("bank_not_allowed", f"bank {str(raw_bank)[:40]!r}"))
        return None
    return Operation(
        op=op,
        ref=ref,
        content=content,
        tags=_tags_of(item),
        bank=bank,
        confidence=_confidence_of(item),
        message=message if message in message_refs else None,
        inferred=str(item.get("source") or "").strip().lower() in _INFERRED,
    )


def _ref_of(item: dict[str, Any]) -> str | None:
    """The item's memory or message ref, lower-cased and without brackets ("[M2]" → "m2")."""
    ref = item.get("ref", item.get("id", item.get("memory_ref")))
    return str(ref).strip().strip("[]").lower() if ref not in (None, "", "null") else None


def _content_of(item: dict[str, Any]) -> str:
    """The fact's text under the first content key that has one, NFC-normalised; "" if none."""
    content = next((item[k] for k in _CONTENT_KEYS if item.get(k)), "")
    return unicodedata.normalize("NFC", str(content)).strip() if content else ""


def _in_third_person(content: str, answer: ParsedAnswer) -> str:
    """The message copied as the fact ("I have a dog") rewritten in the third person; a fact
    that starts in the third person and quotes the user ("User said: my …") stays as written.
    """
    if not _FIRST_PERSON_START.match(content):
        return content
    rewritten = person.third_person(content)
    if rewritten != content:
        answer.recovered.append("first_person")
    return rewritten


def _tags_of(item: dict[str, Any]) -> tuple[str, ...]:
    """The item's known tags (one string or a list), lower-cased, first seen first."""
    raw_tags = item.get("tags") or []
    if isinstance(raw_tags, str):
        raw_tags = [raw_tags]
    if not isinstance(raw_tags, list):
        raw_tags = []
    tags = tuple(dict.fromkeys(t.strip().lower() for t in raw_tags if isinstance(t, str)))
    return tuple(t for t in tags if t in TAGS)


def _confidence_of(item: dict[str, Any]) -> float:
    """The item's confidence clamped to [0, 1]; 0.8 when missing or not a number."""
    try:
        confidence = float(item.get("confidence", 0.8))
    except (TypeError, ValueError):
        confidence = 0.8
    return min(max(confidence, 0.0), 1.0)


_INFERRED = frozenset({"inferred", "inference", "implied", "assistant"})
"""`source` values that mark a fact the LLM concluded rather than one the user stated."""

BANK_NAME_SCORE = 80.0
"""rapidfuzz WRatio (0–100) from which a bank name is read as the nearest bank ("personal
info" → personal, "interaction pattern" → interaction_patterns); ours."""


def _parse_bank(raw: Any, allowed_banks: Sequence[Bank], answer: ParsedAnswer) -> Bank | None:
    """The requested bank if allowed; a near name → that bank; unknown or missing → the
    first allowed bank; a known bank this chat may not write → None.

    A chat with an assistant that has its own memory may write only that memory (DESIGN §3):
    every fact told there belongs to it, whatever bank the LLM names.
    """
    if Bank.ASSISTANT in allowed_banks:
        return Bank.ASSISTANT
    if raw in (None, ""):
        return allowed_banks[0]
    try:
        bank = Bank.parse(str(raw))
    except ValueError:
        names = {b.value.replace("_", " "): b for b in Bank}
        key = str(raw).strip().lower().replace("_", " ").replace("-", " ")
        best = rf_process.extractOne(key, list(names), scorer=fuzz.WRatio)
        if best is None or best[1] < BANK_NAME_SCORE:
            answer.recovered.append("bank_defaulted")
            return allowed_banks[0]
        answer.recovered.append("bank_near_name")
        bank = names[best[0]]
    return bank if bank in allowed_banks else None
