"""core/extraction.parse_operations on the LLM's untrusted answers: malformed, truncated and
hostile ones (through llm.client.decode_json_answer, as the extraction flow reads them)."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime

import pytest

from service.core.extraction import OpKind, parse_operations
from service.core.records import Bank, Memory, OwnerKind, SourceKind, Status
from service.errors import ExtractionOutputInvalid
from service.llm.client import decode_json_answer

T0 = datetime(2026, 5, 1, tzinfo=UTC)
SHOWN = Memory(
    id=uuid.uuid4(),
    seq=1,
    owner_kind=OwnerKind.USER,
    owner_id="ana",
    bank=Bank.PERSONAL,
    content="User has a cat",
    tags=("possession",),
    confidence=0.8,
    status=Status.ACTIVE,
    source_kind=SourceKind.EXTRACTION,
    source_chat_id="c1",
    source_message_id="m1",
    created_at=T0,
    updated_at=T0,
    last_used_at=None,
)
PRIVATE = (Bank.PERSONAL, Bank.INTERACTION)
SHARED = (Bank.INTERACTION,)


def _parse(answer: str, *, banks: tuple[Bank, ...] = PRIVATE) -> list[tuple[object, ...]]:
    ops = parse_operations(
        decode_json_answer(answer), refs={"m1": SHOWN}, allowed_banks=banks, message_refs=("u1",)
    )
    return [(o.op, o.ref, o.content, o.bank, o.confidence, o.tags, o.message) for o in ops]


@pytest.mark.parametrize(
    "answer",
    [
        "I could not find anything worth remembering.",
        '{"result": "nothing"}',
        '{"operations": "NEW: User has a dog"}',
        "42",
    ],
)
def test_an_answer_without_an_operations_list_is_invalid(answer: str) -> None:
    with pytest.raises(ExtractionOutputInvalid):
        _parse(answer)


def test_malformed_operations_are_dropped_and_the_rest_kept() -> None:
    answer = """{"operations": [
        "User has a dog",
        {"op": "EXPLODE", "content": "User has a dog"},
        {"op": "NEW"},
        {"op": "NEW", "content": "   "},
        {"op": "NONE", "content": "User has a cat"},
        {"op": "NEW", "content": "User has a dog", "confidence": "very", "tags": "possession"},
        {"op": "ADD", "content": "User is vegan", "confidence": 7, "tags": ["Preference", 3]}
    ]}"""
    assert _parse(answer) == [
        (OpKind.NEW, None, "User has a dog", Bank.PERSONAL, 0.8, ("possession",), None),
        (OpKind.NEW, None, "User is vegan", Bank.PERSONAL, 1.0, ("preference",), None),
    ]


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"operations": [{"op": "NEW", "content": "User has a dog", "message": "u1"}]}',
        '<think>the user said a dog</think>{"operations": [{"op": "NEW", '
        '"content": "User has a dog", "message": "u1"}]} Hope this helps!',
    ],
    ids=["unclosed fence", "reasoning and trailing text"],
)
def test_a_wrapped_answer_keeps_its_operation(answer: str) -> None:
    assert _parse(answer) == [
        (OpKind.NEW, None, "User has a dog", Bank.PERSONAL, 0.8, (), "u1"),
    ]


def test_a_truncated_answer_is_invalid_rather_than_half_applied() -> None:
    with pytest.raises(ExtractionOutputInvalid, match="truncated"):
        _parse('{"operations": [{"op": "NEW", "content": "User has a dog"}, {"op": "DEL')


def test_an_update_without_a_bank_stays_in_its_memorys_bank() -> None:
    pattern = dataclasses.replace(SHOWN, seq=2, bank=Bank.INTERACTION, content="Likes lists")
    ops = parse_operations(
        decode_json_answer(
            '{"operations": [{"op": "UPDATE", "ref": "m2", "content": "Likes tables"}]}'
        ),
        refs={"m1": SHOWN, "m2": pattern},
        allowed_banks=PRIVATE,
    )
    assert [(o.op, o.ref, o.bank) for o in ops] == [(OpKind.UPDATE, "m2", Bank.INTERACTION)]


def test_hostile_operations_cannot_reach_what_was_not_shown_or_not_allowed() -> None:
    answer = """{"operations": [
        {"op": "DELETE", "ref": "m99"},
        {"op": "UPDATE", "ref": "m99", "content": "User has two cats"},
        {"op": "UPDATE", "ref": "[m1]", "content": "User has three cats", "confidence": -4},
        {"op": "NEW", "content": "User's password hint is blue", "bank": "project"},
        {"op": "NEW", "content": "User likes short answers", "bank": "interaction_patterns",
         "message": "u7"}
    ]}"""
    assert _parse(answer) == [
        # an UPDATE or DELETE of a memory that was not shown is refused (issue 13 item 13),
        # never turned into a new fact
        (OpKind.UPDATE, "m1", "User has three cats", Bank.PERSONAL, 0.0, (), None),
        # a message ref outside the batch is dropped (the caller attributes it to the last)
        (OpKind.NEW, None, "User likes short answers", Bank.INTERACTION, 0.8, (), None),
    ]


def test_a_shared_chat_cannot_be_made_to_write_personal_memories() -> None:
    answer = """{"operations": [
        {"op": "NEW", "content": "Ana's address is 1 Main St", "bank": "personal"},
        {"op": "UPDATE", "ref": "m1", "content": "User has no cat"},
        {"op": "NEW", "content": "User likes tables"}
    ]}"""
    assert _parse(answer, banks=SHARED) == [
        (OpKind.NEW, None, "User likes tables", Bank.INTERACTION, 0.8, (), None),
    ]
