"""Batching policy: thresholds, lookback, "remember that …", context changes, message hashes,
the token estimate, the batch prompt and the rolling summary's fold decision."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.core import chat_summary
from service.core.batching import (
    BatchPolicy,
    PendingTurn,
    asks_to_remember,
    message_hash,
    plan_batches,
    turn_tokens,
)
from service.core.chat_summary import FoldDecision, decide_fold, parse_summary
from service.core.extraction import TurnText, build_messages, parse_operations
from service.core.records import Bank
from service.core.tokens import estimate_tokens
from service.errors import ChatSummaryInvalid

POLICY = BatchPolicy(max_tokens=1000, max_messages=5, lookback_turns=0)


def _turns(
    *tokens: int, remember: tuple[int, ...] = (), context: dict[int, str] | None = None
) -> list[PendingTurn]:
    return [
        PendingTurn(
            turn_id=i + 1,
            tokens=t,
            remember=i + 1 in remember,
            context=(context or {}).get(i + 1, "chat-a"),
        )
        for i, t in enumerate(tokens)
    ]


def test_four_short_turns_wait_and_the_fifth_makes_a_batch() -> None:
    assert plan_batches(_turns(40, 40, 40, 40), POLICY, quiet=False) == []
    assert plan_batches(_turns(40, 40, 40, 40, 40), POLICY, quiet=False) == [(1, 2, 3, 4, 5)]


def test_a_batch_closes_at_the_token_threshold_before_the_message_count() -> None:
    assert plan_batches(_turns(600, 300, 50), POLICY, quiet=False) == []
    assert plan_batches(_turns(600, 300, 100), POLICY, quiet=False) == [(1, 2, 3)]
    assert plan_batches(_turns(1200), POLICY, quiet=False) == [(1,)]


def test_only_full_batches_are_due_and_the_rest_waits() -> None:
    turns = _turns(*[10] * 12)
    assert plan_batches(turns, POLICY, quiet=False) == [(1, 2, 3, 4, 5), (6, 7, 8, 9, 10)]


def test_a_quiet_chat_takes_every_waiting_turn() -> None:
    turns = _turns(*[10] * 7)
    assert plan_batches(turns, POLICY, quiet=True) == [(1, 2, 3, 4, 5), (6, 7)]
    assert plan_batches(_turns(10), POLICY, quiet=True) == [(1,)]
    assert plan_batches([], POLICY, quiet=True) == []


def test_the_newest_turns_are_held_back_while_the_chat_is_active() -> None:
    policy = BatchPolicy(max_tokens=1000, max_messages=2, lookback_turns=1)
    assert plan_batches(_turns(10, 10), policy, quiet=False) == []
    assert plan_batches(_turns(10, 10, 10), policy, quiet=False) == [(1, 2)]
    assert plan_batches(_turns(10, 10, 10), policy, quiet=True) == [(1, 2), (3,)]


def test_a_remember_request_makes_everything_up_to_it_due_at_once() -> None:
    assert plan_batches(_turns(10, 10, remember=(2,)), POLICY, quiet=False) == [(1, 2)]
    policy = BatchPolicy(max_tokens=1000, max_messages=5, lookback_turns=3)
    assert plan_batches(_turns(10, 10, remember=(2,)), policy, quiet=False) == [(1, 2)]
    # turns after the request still wait for their own batch
    assert plan_batches(_turns(10, 10, 10, remember=(2,)), POLICY, quiet=False) == [(1, 2)]


def test_a_change_of_chat_context_closes_the_batch() -> None:
    turns = _turns(10, 10, 10, context={3: "chat-a in folder"})
    assert plan_batches(turns, POLICY, quiet=False) == [(1, 2)]
    assert plan_batches(turns, POLICY, quiet=True) == [(1, 2), (3,)]


def test_one_message_per_batch_is_extraction_per_turn() -> None:
    policy = BatchPolicy(max_tokens=1000, max_messages=1)
    assert plan_batches(_turns(5, 5), policy, quiet=False) == [(1,), (2,)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Remember that I'm allergic to peanuts.", True),
        ("I'm allergic to peanuts, please remember.", True),
        ("Can you remember that my sister is Jane?", True),
        ("Don\u2019t forget: the meeting moved to Friday.", True),
        ("Keep in mind that I use a screen reader.", True),
        ("Save this to your memory: I drive a blue Fiat.", True),
        ("Merk dir bitte, dass ich Vegetarier bin.", True),
        ("Souviens-toi que je pars en juin.", True),
        ("Recuerda que trabajo de noche.", True),
        ("Do you remember that film we talked about?", False),
        ("I remember that day well.", False),
        ("What's the capital of Peru?", False),
    ],
)
def test_remember_requests_are_recognised(text: str, expected: bool) -> None:
    assert asks_to_remember(text) is expected


def test_the_message_hash_ignores_ids_and_spacing_but_not_the_place_in_the_chat() -> None:
    history = [("user", "Hi"), ("assistant", "Hello! How can I help?")]
    first = message_hash(chat_id="c1", user_id="u1", user_message="I like  tea.", history=history)
    assert len(first) == 64 and int(first, 16) >= 0
    assert first == message_hash(
        chat_id="c1",
        user_id="u1",
        user_message="I like tea.",
        history=[("user", "Hi"), ("assistant", "Hello!  How can I help?")],
    )
    assert first != message_hash(
        chat_id="c1",
        user_id="u1",
        user_message="I like tea.",
        history=[*history, ("user", "More?"), ("assistant", "Sure.")],
    )
    assert first != message_hash(
        chat_id="c2", user_id="u1", user_message="I like tea.", history=history
    )
    assert first != message_hash(
        chat_id="c1", user_id="u2", user_message="I like tea.", history=history
    )


def test_the_token_estimate_takes_the_higher_estimate_and_adds_the_margin() -> None:
    # 10 words: 13.5 by words; 50 characters: 14.3 by characters
    text = "abcd " * 9 + "abcd"
    assert len(text) == 49
    assert estimate_tokens(text) == 14  # ceil(49 / 3.5) = 14 > ceil(13.5)
    assert estimate_tokens(text, safety_margin=1.10) == 16  # ceil(15.4)
    # short words: the word estimate is higher
    assert estimate_tokens("a b c d e f g h i j") == 14  # ceil(10 * 1.35)
    assert turn_tokens("a b c d e f g h i j", None) == 15  # ceil(13.5 * 1.1)
    assert turn_tokens("a b c d e", "f g h i j") == 15


def test_a_batch_prompt_quotes_every_new_message_under_its_ref() -> None:
    at = datetime(2026, 5, 8, 9, 30, tzinfo=UTC)
    batch = [
        TurnText("I moved to Lyon.", "Nice!", [("user", "Hi"), ("assistant", "Hello")], at),
        TurnText("My cat is Miso.", None, [], at.replace(day=9)),
    ]
    messages = build_messages(
        turns=batch,
        user_name="Ana",
        now=at.replace(day=9),
        neighbours=[],
        allowed_banks=[Bank.PERSONAL],
    )
    prompt = messages[-1]["content"]
    assert prompt.endswith(
        "NEW USER MESSAGES (2):\n"
        "[u1] 2026-05-08 (Friday)\n<new_user_message>I moved to Lyon.</new_user_message>\n"
        "ASSISTANT REPLY (context only, never a fact about the user):\n"
        "<assistant_reply>Nice!</assistant_reply>\n\n"
        "[u2] 2026-05-09 (Saturday)\n<new_user_message>My cat is Miso.</new_user_message>\n"
        "ASSISTANT REPLY (context only, never a fact about the user):\n"
        "<assistant_reply></assistant_reply>"
    )
    assert "EARLIER MESSAGES (context only):\nuser: Hi\nassistant: Hello\n" in prompt


def test_operations_name_their_message_or_fall_back_to_none() -> None:
    data = {
        "operations": [
            {"op": "NEW", "content": "User lives in Lyon", "message": "u1"},
            {"op": "NEW", "content": "User has a cat named Miso", "message": "[U2]"},
            {"op": "NEW", "content": "User likes jazz", "message": "u7"},
            {"op": "NEW", "content": "User is 41"},
        ]
    }
    ops = parse_operations(data, refs={}, allowed_banks=[Bank.PERSONAL], message_refs=["u1", "u2"])
    assert [(o.content, o.message) for o in ops] == [
        ("User lives in Lyon", "u1"),
        ("User has a cat named Miso", "u2"),
        ("User likes jazz", None),
        ("User is 41", None),
    ]


@pytest.mark.parametrize(
    ("uncovered", "has_summary", "quiet", "expected"),
    [
        (1999, False, False, FoldDecision.WAIT),
        (2000, False, False, FoldDecision.FOLD),
        (1999, False, True, FoldDecision.DROP),
        (300, True, False, FoldDecision.WAIT),
        (300, True, True, FoldDecision.FOLD),
        (0, True, True, FoldDecision.DROP),
    ],
)
def test_a_chat_is_summarised_once_long_and_then_every_threshold_and_when_quiet(
    uncovered: int,
    has_summary: bool,
    quiet: bool,
    expected: FoldDecision,
) -> None:
    assert (
        decide_fold(
            uncovered_tokens=uncovered,
            threshold_tokens=2000,
            has_summary=has_summary,
            chat_quiet=quiet,
        )
        is expected
    )


def test_summaries_switched_off_drop_the_texts() -> None:
    assert (
        decide_fold(uncovered_tokens=10_000, threshold_tokens=0, has_summary=True, chat_quiet=False)
        is FoldDecision.DROP
    )


def test_a_summary_answer_is_validated_and_cut_at_a_word() -> None:
    assert parse_summary({"summary": "  Ana  plans a trip. "}, max_chars=100) == "Ana plans a trip."
    assert (
        parse_summary({"summary": "Ana plans a long trip to Peru"}, max_chars=20)
        == "Ana plans a long…"
    )
    for bad in ({"summary": ""}, {"text": "x"}, ["x"], None):
        with pytest.raises(ChatSummaryInvalid):
            parse_summary(bad, max_chars=100)


def test_the_summary_prompt_carries_the_previous_summary_and_only_new_messages() -> None:
    at = datetime(2026, 5, 8, tzinfo=UTC)
    messages = chat_summary.build_messages(
        previous="Ana is planning a trip to Peru.",
        messages=[
            chat_summary.SummaryMessage("Ana", "We fly on June 3.", at),
            chat_summary.SummaryMessage("assistant", "Noted.", at),
        ],
        now=at,
        max_chars=800,
    )
    assert "At most 800 characters." in messages[0]["content"]
    assert messages[1]["content"] == (
        "Current date: 2026-05-08 (Friday)\n\n"
        "SUMMARY SO FAR:\n<chat_summary>Ana is planning a trip to Peru.</chat_summary>\n\n"
        "NEW MESSAGES (2):\n<new_messages>\n[2026-05-08] Ana: We fly on June 3.\n"
        "[2026-05-08] assistant: Noted.\n</new_messages>"
    )


def test_an_edit_replaces_the_old_sibling_and_the_turns_that_followed_it() -> None:
    from service.core.batching import BranchTurn, replaced_turns

    old = BranchTurn(1, "I have a dog", [("assistant", "Hi!")], parent="a0")
    follower = BranchTurn(
        2, "He is 3", [("assistant", "Hi!"), ("user", "I have a dog")], parent="a1"
    )
    elsewhere = BranchTurn(3, "I live in Lyon", [("user", "Unrelated")], parent="a7")
    edit = BranchTurn(4, "I have a cat", [("assistant", "Hi!")], parent="a0")
    assert replaced_turns(edit, [old, follower, elsewhere, edit]) == [1, 2]
    # the same text at the same place is the same message, not an edit
    again = BranchTurn(5, "I have  a dog", [("assistant", "Hi!")], parent="a0")
    assert replaced_turns(again, [old, again]) == []
    # a turn further along the branch replaces nothing
    onward = BranchTurn(6, "Walks daily", [("user", "He is 3")], parent="a2")
    assert replaced_turns(onward, [old, follower, onward]) == []


def test_turns_without_a_known_parent_are_never_taken_for_edits() -> None:
    from service.core.batching import BranchTurn, replaced_turns

    first = BranchTurn(1, "fact one", [])
    second = BranchTurn(2, "fact two", [])
    assert replaced_turns(second, [first, second]) == []
    rooted = BranchTurn(3, "fact three", [], parent="")
    assert replaced_turns(rooted, [first, second, rooted]) == []
