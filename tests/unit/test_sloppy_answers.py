"""What real small models answered, read by core/extraction.parse_answer: mended where the
intent is clear, dropped with a reason where not (never silently)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from service.core.extraction import (
    REPAIR_PROMPT,
    SYSTEM_PROMPT,
    OpKind,
    ParsedAnswer,
    answer_schema,
    parse_answer,
)
from service.core.records import Bank, Memory, OwnerKind, SourceKind, Status
from service.errors import ExtractionOutputInvalid
from service.llm.client import decode_json_answer
from service.llm.salvage import salvage_truncated
from testkit import sloppy_replies as sloppy

T0 = datetime(2026, 5, 1, tzinfo=UTC)
SHOWN = Memory(
    id=uuid.uuid4(),
    seq=1,
    owner_kind=OwnerKind.USER,
    owner_id="ana",
    bank=Bank.PERSONAL,
    content="User works at Falcon Logistics",
    tags=("identity",),
    confidence=0.8,
    status=Status.ACTIVE,
    source_kind=SourceKind.EXTRACTION,
    source_chat_id="c1",
    source_message_id="m1",
    created_at=T0,
    updated_at=T0,
    last_used_at=None,
)
BANKS = (Bank.PERSONAL, Bank.INTERACTION)


def _parse(ops: list[dict[str, Any]], banks: tuple[Bank, ...] = BANKS) -> ParsedAnswer:
    return parse_answer(
        {"operations": ops}, refs={"m1": SHOWN}, allowed_banks=banks, message_refs=("u1", "u2")
    )


def test_the_prompt_has_no_placeholder_a_model_could_copy() -> None:
    for prompt in (SYSTEM_PROMPT, REPAIR_PROMPT):
        assert "NEW|UPDATE" not in prompt and "..." not in prompt and "|" not in prompt


def test_qwens_verbatim_answer_becomes_a_third_person_new_fact_of_its_message() -> None:
    parsed = _parse([sloppy.verbatim("I have a dog named Pixel.", message="u2")])
    [op] = parsed.operations
    assert (op.op, op.ref, op.message, op.content) == (
        OpKind.NEW,
        None,
        "u2",
        "User has a dog named Pixel.",
    )
    assert sorted(parsed.recovered) == ["first_person", "message_ref_as_ref", "op_placeholder"]
    assert parsed.dropped == [] and parsed.refused == []


@pytest.mark.parametrize(
    ("raw", "ref", "expected"),
    [
        ("NEW|UPDATE", None, OpKind.NEW),
        ("NEW|UPDATE", "m1", OpKind.UPDATE),
        ("NEW|UPDATE|DELETE|NONE", None, OpKind.NEW),
        ("new", None, OpKind.NEW),
        ("add", None, OpKind.NEW),
        ("create", None, OpKind.NEW),
        ("modify", "m1", OpKind.UPDATE),
        ("Update", "m1", OpKind.UPDATE),
        (None, None, OpKind.NEW),
    ],
)
def test_op_names_small_models_write_are_read(
    raw: str | None, ref: str | None, expected: OpKind
) -> None:
    [op] = _parse([{"op": raw, "ref": ref, "content": "User works at Heron Freight"}]).operations
    assert op.op is expected


def test_what_cannot_be_mended_is_dropped_with_its_reason() -> None:
    parsed = _parse(
        [
            {"op": "MERGE", "content": "User likes jazz"},
            "User likes jazz",
            {"op": "NEW", "content": ""},
            {"op": "NEW", "content": "User's app is for language learners", "bank": "project"},
            {"op": "DELETE", "ref": "u1"},
            {"op": "UPDATE", "ref": "m7", "content": "User works at Heron Freight"},
        ]
    )
    assert parsed.operations == []
    assert [d.reason for d in parsed.dropped] == [
        "unknown_op",
        "malformed",
        "no_content",
        "bank_not_allowed",
    ]
    assert [(r.op, r.ref) for r in parsed.refused] == [
        (OpKind.DELETE, "u1"),
        (OpKind.UPDATE, "m7"),
    ]


@pytest.mark.parametrize(
    ("raw", "bank", "mend"),
    [
        ("Personal Info", Bank.PERSONAL, "bank_near_name"),
        ("interaction pattern", Bank.INTERACTION, "bank_near_name"),
        ("PERSONAL", Bank.PERSONAL, None),
        ("memories", Bank.PERSONAL, "bank_defaulted"),
    ],
)
def test_a_bank_given_by_a_near_name_is_that_bank(raw: str, bank: Bank, mend: str | None) -> None:
    parsed = _parse([{"op": "NEW", "content": "User prefers short answers", "bank": raw}])
    assert parsed.operations[0].bank is bank
    assert parsed.recovered == ([mend] if mend else [])


@pytest.mark.parametrize(
    "wrap", [sloppy.with_prose, sloppy.in_fence, lambda a: sloppy.with_prose(sloppy.in_fence(a))]
)
def test_prose_and_fences_around_the_json_are_read(wrap: Any) -> None:
    answer = json.dumps({"operations": [sloppy.placeholder_op("User works at Heron Freight")]})
    parsed = parse_answer(
        decode_json_answer(wrap(answer)), refs={}, allowed_banks=BANKS, message_refs=("u1",)
    )
    assert [op.content for op in parsed.operations] == ["User works at Heron Freight"]


def test_smollm2s_empty_list_with_invented_keys_is_nothing_to_do() -> None:
    parsed = parse_answer(decode_json_answer(sloppy.invented_keys()), refs={}, allowed_banks=BANKS)
    assert (parsed.operations, parsed.dropped, parsed.refused) == ([], [], [])


def test_a_list_under_another_key_or_a_lone_operation_is_read() -> None:
    for data in (
        {"facts": [{"op": "NEW", "content": "User keeps bees"}]},
        {"op": "add", "fact": "User keeps bees"},
    ):
        parsed = parse_answer(data, refs={}, allowed_banks=BANKS)
        assert [op.content for op in parsed.operations] == ["User keeps bees"]


def test_a_truncated_answer_keeps_only_its_complete_operations() -> None:
    cut = sloppy.truncated(
        json.dumps(
            {
                "operations": [
                    sloppy.placeholder_op("User commutes by tram"),
                    sloppy.placeholder_op("User reads on the tram"),
                ]
            }
        )
    )
    with pytest.raises(ExtractionOutputInvalid, match="truncated"):
        decode_json_answer(cut)
    parsed = parse_answer(salvage_truncated(cut), refs={}, allowed_banks=BANKS)
    assert [op.content for op in parsed.operations] == ["User commutes by tram"]
    with pytest.raises(ExtractionOutputInvalid):
        salvage_truncated('{"operations": [{"op": "NEW", "content": "User wor')


def test_the_answer_schema_names_only_shown_refs_new_messages_and_allowed_banks() -> None:
    schema = answer_schema(
        shown_refs=["m1", "m2"], message_refs=["u1"], allowed_banks=[Bank.PERSONAL]
    )
    item = schema["properties"]["operations"]["items"]["properties"]
    assert item["ref"]["anyOf"][0]["enum"] == ["m1", "m2"]
    assert item["message"]["enum"] == ["u1"]
    assert item["bank"]["enum"] == ["personal"]
    assert item["op"]["enum"] == ["NEW", "UPDATE", "DELETE"]
    no_memories = answer_schema(shown_refs=[], message_refs=["u1"], allowed_banks=BANKS)
    assert no_memories["properties"]["operations"]["items"]["properties"]["ref"] == {"type": "null"}
