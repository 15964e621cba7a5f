"""bench/locomo.py: evidence ids, session dates, turn groups, facts and questions.

The small hand-written samples pin the rules and the invariants; the real `locomo10.json` (read
from `../shared/data/locomo/`) pins the counts of LOCOMO.md, and its tests skip in a clone
without it (tests/support/data_sets.py).
"""

import json
from datetime import UTC, datetime

import pytest

from bench import locomo
from bench.locomo import Fact, QAItem, Turn, TurnGroup
from tests.support import locomo_sample
from tests.support.data_sets import require

SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        # session 10 first: sessions must be ordered by number, not by key order
        "session_10_date_time": "12:30 pm on 3 Feb, 2024",
        "session_10": [
            {"speaker": "Ann", "dia_id": "D10:1", "text": "Later"},
            {"speaker": "Bob", "dia_id": "D10:2", "text": "Yes"},
        ],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Bob", "dia_id": "D1:1", "text": "Hi Ann"},
            {"speaker": "Ann", "dia_id": "D1:2", "text": "Hi Bob"},
            {
                "speaker": "Ann",
                "dia_id": "D1:3",
                "text": "Look",
                "blip_caption": "a photo of a cat",
            },
            {"speaker": "Bob", "dia_id": "D1:4", "text": "Nice"},
            {"speaker": "Bob", "dia_id": "D1:5", "text": "Really"},
            {"speaker": "Ann", "dia_id": "D1:6", "text": "Bye"},
        ],
        "session_2_date_time": "12:05 am on 1 January, 2024",
        "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "Only Bob"}],
        "session_11_date_time": "9:00 am on 4 March, 2024",  # a date without a session
    },
    "observation": {
        "session_10_observation": {"Ann": [["Ann spans sessions.", "D1:2, D10:2"]]},
        "session_1_observation": {
            "Ann": [
                ["Ann has a cat.", "D1:3"],
                ["Ann greets Bob.", ["D1:2", "D1:05"]],
                ["Ann was greeted.", "D1:1"],
                ["Ann cites nothing real.", "D7:7"],
            ],
            "Bob": [["Bob says nice things.", "D1:4; D1:5"]],
        },
    },
    "qa": [
        {"question": "q0", "answer": "a0", "evidence": ["D1:2; D1:4"], "category": 1},
        {
            "question": "When did Ann's cat see Bob?",
            "answer": 2022,
            "evidence": ["D1:4", "D:1:5", "D2:01"],
            "category": 2,
        },
        {"question": "q2", "answer": "a2", "evidence": ["D9:9"], "category": 3},
        {"question": "q3", "adversarial_answer": "a3", "evidence": ["D1:1"], "category": 5},
        {"question": "q4", "answer": "a4", "evidence": [], "category": 4},
        {
            "question": "Did Bob reply?",
            "answer": "a5",
            "evidence": ["D10:1 D10:2 D1:6"],
            "category": 4,
        },
        {"question": "Was Annabel there?", "answer": "a6", "evidence": ["D1:1"], "category": 4},
    ],
}

KNOWN = {"D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D1:6", "D2:1", "D10:1", "D10:2"}


@pytest.fixture(scope="module")
def samples() -> list[dict]:
    require(
        locomo.DEFAULT_DATA_PATH,
        name="LoCoMo's locomo10.json",
        how="place the data set's locomo10.json there (the project's shared/ folder beside the "
        "checkout holds it; bench/locomo.py says where it comes from)",
    )
    return locomo.load_conversations(locomo.DEFAULT_DATA_PATH)


def own_samples() -> list[dict]:
    """Our own LoCoMo-shaped conversations, for the invariants the real data set pins at scale."""
    return [SAMPLE, locomo_sample.sample()]


# -- evidence ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D1:3", "D1:3"),
        ("D:11:26", "D11:26"),
        ("D30:05", "D30:5"),
        ("D03:007", "D3:7"),
        (" D2:1 ", "D2:1"),
        ("D", None),
        ("D1", None),
        ("1:3", None),
        ("", None),
    ],
)
def test_normalize_dia_id_fixes_colon_and_leading_zeros(raw: str, expected: str | None) -> None:
    assert locomo.normalize_dia_id(raw) == expected


def test_normalize_evidence_splits_on_semicolons_commas_and_spaces() -> None:
    assert locomo.normalize_evidence(["D8:6; D9:17"]) == ("D8:6", "D9:17")
    assert locomo.normalize_evidence("D26:14, D26:34, D26:42") == ("D26:14", "D26:34", "D26:42")
    assert locomo.normalize_evidence(["D9:1 D4:4 D4:6"]) == ("D9:1", "D4:4", "D4:6")
    assert locomo.normalize_evidence(["D1:2;D1:3,D1:4  D1:5"]) == ("D1:2", "D1:3", "D1:4", "D1:5")


def test_normalize_evidence_drops_unknown_malformed_and_repeated_ids() -> None:
    raw = ["D1:3", "D", "D:1:4", "D1:03", "D9:9", "D30:05"]
    assert locomo.normalize_evidence(raw, KNOWN) == ("D1:3", "D1:4")
    assert locomo.normalize_evidence(raw) == ("D1:3", "D1:4", "D9:9", "D30:5")
    assert locomo.normalize_evidence([], KNOWN) == ()


# -- dates -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:04 am on 19 December, 2023", datetime(2023, 12, 19, 10, 4, tzinfo=UTC)),
        ("12:05 am on 1 January, 2024", datetime(2024, 1, 1, 0, 5, tzinfo=UTC)),
        ("12:30 pm on 3 Feb, 2024", datetime(2024, 2, 3, 12, 30, tzinfo=UTC)),
        ("9:55 am on 22 October, 2023", datetime(2023, 10, 22, 9, 55, tzinfo=UTC)),
    ],
)
def test_parse_session_date_gives_utc_datetimes(text: str, expected: datetime) -> None:
    assert locomo.parse_session_date(text) == expected


def test_parse_session_date_rejects_other_shapes() -> None:
    with pytest.raises(ValueError, match="not a LoCoMo session date: '2023-05-08'"):
        locomo.parse_session_date("2023-05-08")
    with pytest.raises(ValueError, match="unknown month 'Mai'"):
        locomo.parse_session_date("1:56 pm on 8 Mai, 2023")


def _session_dates(samples: list[dict]) -> list[datetime]:
    parsed = [
        locomo.parse_session_date(sample["conversation"][f"session_{n}_date_time"])
        for sample in samples
        for n in locomo.session_numbers(sample)
    ]
    assert all(moment.tzinfo is UTC for moment in parsed)
    return parsed


def test_every_session_date_in_locomo_parses(samples: list[dict]) -> None:
    assert len(_session_dates(samples)) == 272


def test_every_session_date_of_our_samples_parses() -> None:
    assert len(_session_dates(own_samples())) == 3 + 2  # sessions with turns only


# -- turns and groups --------------------------------------------------------------------------


def test_sessions_are_numeric_and_only_those_with_turns() -> None:
    assert locomo.session_numbers(SAMPLE) == [1, 2, 10]
    assert locomo.last_session_date(SAMPLE) == datetime(2024, 2, 3, 12, 30, tzinfo=UTC)


def test_image_caption_is_appended_to_the_turn_text() -> None:
    assert locomo.turn_text({"text": "Look", "blip_caption": "a photo of a cat"}) == (
        "Look [shares a photo of a cat]"
    )
    assert locomo.turn_text({"text": "Plain"}) == "Plain"


def test_replay_plan_groups_user_turns_with_the_following_reply() -> None:
    plan = locomo.build_replay_plan(SAMPLE, "Ann")
    assert (plan.conversation_id, plan.speaker, plan.other) == ("conv-x", "Ann", "Bob")
    assert [s.session for s in plan.sessions] == [1, 10]  # session 2 has no turn of Ann
    first = plan.sessions[0]
    assert first.date == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert first.date_time == "1:56 pm on 8 May, 2023"
    assert first.opening == (Turn("D1:1", 1, "Bob", "Hi Ann"),)
    assert first.opening_text == "Hi Ann"
    assert first.groups == (
        TurnGroup(
            session=1,
            user_turns=(
                Turn("D1:2", 1, "Ann", "Hi Bob"),
                Turn("D1:3", 1, "Ann", "Look [shares a photo of a cat]"),
            ),
            reply_turns=(Turn("D1:4", 1, "Bob", "Nice"), Turn("D1:5", 1, "Bob", "Really")),
        ),
        TurnGroup(session=1, user_turns=(Turn("D1:6", 1, "Ann", "Bye"),), reply_turns=()),
    )
    assert first.groups[0].key == "D1:2"
    assert first.groups[0].user_text == "Hi Bob\nLook [shares a photo of a cat]"
    assert first.groups[0].reply_text == "Nice\nReally"
    assert first.groups[1].reply_text == ""
    assert [g.key for g in plan.groups] == ["D1:2", "D1:6", "D10:1"]


def test_replay_plan_of_the_other_speaker() -> None:
    plan = locomo.build_replay_plan(SAMPLE, "Bob")
    assert [s.session for s in plan.sessions] == [1, 2, 10]
    assert plan.sessions[0].opening_text is None
    assert plan.sessions[2].opening_text == "Later"
    assert [(g.key, g.dia_ids) for g in plan.groups] == [
        ("D1:1", ("D1:1", "D1:2", "D1:3")),
        ("D1:4", ("D1:4", "D1:5", "D1:6")),
        ("D2:1", ("D2:1",)),
        ("D10:2", ("D10:2",)),
    ]


def test_replay_plan_rejects_a_stranger() -> None:
    with pytest.raises(ValueError, match="'Eve' is not a speaker of conv-x"):
        locomo.build_replay_plan(SAMPLE, "Eve")


def test_real_conversation_0_starts_as_in_the_data(samples: list[dict]) -> None:
    caroline = locomo.build_replay_plan(samples[0], "Caroline")
    melanie = locomo.build_replay_plan(samples[0], "Melanie")
    assert (len(caroline.sessions), len(caroline.groups)) == (19, 211)
    assert (len(melanie.sessions), len(melanie.groups)) == (19, 208)
    assert caroline.groups[0].user_text == "Hey Mel! Good to see you! How have you been?"
    assert caroline.groups[0].reply_turns[0].dia_id == "D1:2"
    assert caroline.groups[2].user_text == (
        "The transgender stories were so inspiring! I was so happy and thankful for all the "
        "support. [shares a photo of a dog walking past a wall with a painting of a woman]"
    )
    assert melanie.sessions[0].opening_text == "Hey Mel! Good to see you! How have you been?"
    assert melanie.groups[0].key == "D1:2"


def _turns_each_in_one_plan(samples: list[dict]) -> int:
    """Checks every turn is a user turn of exactly one speaker's plan; the number of turns."""
    for sample in samples:
        user_ids = [
            turn.dia_id
            for speaker in locomo.speakers(sample)
            for group in locomo.build_replay_plan(sample, speaker).groups
            for turn in group.user_turns
        ]
        assert sorted(user_ids) == sorted(t.dia_id for t in locomo.conversation_turns(sample))
    return sum(len(locomo.conversation_turns(s)) for s in samples)


def test_every_turn_is_a_user_turn_in_exactly_one_plan(samples: list[dict]) -> None:
    assert _turns_each_in_one_plan(samples) == 5882


def test_every_turn_of_our_samples_is_a_user_turn_in_exactly_one_plan() -> None:
    assert _turns_each_in_one_plan(own_samples()) == 9 + locomo_sample.TURNS


# -- facts -------------------------------------------------------------------------------------


def test_facts_are_read_in_session_order_with_normalised_ids() -> None:
    assert locomo.speaker_facts(SAMPLE, "Ann") == [
        Fact("Ann has a cat.", ("D1:3",), 1, "Ann"),
        Fact("Ann greets Bob.", ("D1:2", "D1:5"), 1, "Ann"),
        Fact("Ann was greeted.", ("D1:1",), 1, "Ann"),
        Fact("Ann cites nothing real.", (), 1, "Ann"),
        Fact("Ann spans sessions.", ("D1:2", "D10:2"), 10, "Ann"),
    ]


def test_each_fact_is_extracted_at_the_group_of_its_last_cited_turn() -> None:
    plan = locomo.build_replay_plan(SAMPLE, "Ann")
    assert {key: [f.text for f in facts] for key, facts in plan.facts_at.items()} == {
        "D1:2": ["Ann has a cat.", "Ann greets Bob."],
        "D10:1": ["Ann spans sessions."],
    }
    # "Ann was greeted." cites only the opening turn, "Ann cites nothing real." nothing at all
    assert [f.text for f in plan.assigned_facts] == [
        "Ann has a cat.",
        "Ann greets Bob.",
        "Ann spans sessions.",
    ]
    bob = locomo.build_replay_plan(SAMPLE, "Bob")
    assert {k: [f.text for f in v] for k, v in bob.facts_at.items()} == {
        "D1:4": ["Bob says nice things."]
    }


def test_every_real_fact_is_assigned_to_exactly_one_group(samples: list[dict]) -> None:
    assert _facts_each_in_one_group(samples) == (2541, 2540)


def test_every_fact_of_our_samples_is_assigned_to_exactly_one_group() -> None:
    # SAMPLE: Ann's five facts, of which two cite no turn of hers, and Bob's one
    assert _facts_each_in_one_group(own_samples()) == (
        6 + locomo_sample.FACTS,
        4 + locomo_sample.FACTS,
    )


def _facts_each_in_one_group(samples: list[dict]) -> tuple[int, int]:
    """Checks each fact is extracted at the group of its last cited user turn, once;
    (facts, facts assigned)."""
    total_facts = total_assigned = 0
    for sample in samples:
        for speaker in locomo.speakers(sample):
            plan = locomo.build_replay_plan(sample, speaker)
            position = {d: i for i, group in enumerate(plan.groups) for d in group.dia_ids}
            seen: list[Fact] = []
            for index, group in enumerate(plan.groups):
                for fact in plan.facts_at.get(group.key, ()):
                    seen.append(fact)
                    assert index == max(position[d] for d in fact.dia_ids if d in position)
            assert len(seen) == len(set(seen))
            assert set(seen) == {f for f in plan.facts if position.keys() & set(f.dia_ids)}
            total_facts += len(plan.facts)
            total_assigned += len(seen)
    return total_facts, total_assigned


# -- questions ---------------------------------------------------------------------------------


def test_questions_are_asked_by_the_speakers_their_text_names() -> None:
    # never by who spoke the evidence: q5's evidence is mostly Ann's, its text names Bob
    assert locomo.load_qa(SAMPLE) == [
        QAItem(0, "q0", "a0", 1, ("D1:2", "D1:4"), ("Ann", "Bob")),  # names nobody → both
        QAItem(
            1, "When did Ann's cat see Bob?", "2022", 2, ("D1:4", "D1:5", "D2:1"), ("Ann", "Bob")
        ),
        QAItem(5, "Did Bob reply?", "a5", 4, ("D10:1", "D10:2", "D1:6"), ("Bob",)),
        QAItem(6, "Was Annabel there?", "a6", 4, ("D1:1",), ("Ann", "Bob")),  # not "Ann"
    ]
    assert [q.index for q in locomo.load_qa(SAMPLE, categories=(5,))] == [3]


def test_our_samples_questions_of_categories_1_to_4_all_have_evidence() -> None:
    questions = [q for sample in own_samples() for q in locomo.load_qa(sample)]
    assert len(questions) == 4 + locomo_sample.QUESTIONS
    assert all(q.evidence and q.category in (1, 2, 3, 4) for q in questions)


def test_locomo_has_1536_questions_in_categories_1_to_4(samples: list[dict]) -> None:
    questions = [q for sample in samples for q in locomo.load_qa(sample)]
    assert len(questions) == 1536
    by_category = {c: sum(q.category == c for q in questions) for c in (1, 2, 3, 4)}
    assert by_category == {1: 282, 2: 321, 3: 92, 4: 841}
    assert all(q.evidence for q in questions)


def test_real_questions_keep_their_fixed_evidence(samples: list[dict]) -> None:
    conv0 = {q.index: q for q in locomo.load_qa(samples[0])}
    assert len(conv0) == 150
    assert 30 not in conv0 and 46 not in conv0  # no evidence at all
    assert conv0[37].evidence == ("D8:6", "D9:17")  # "D8:6; D9:17"
    assert conv0[37].askers == ("Melanie",)  # "What did Melanie paint recently?"
    assert conv0[55].evidence == ("D14:5", "D8:6")
    assert conv0[55].askers == ("Caroline", "Melanie")  # "... Caroline and Melanie both ..."
    conv4 = {q.index: q for q in locomo.load_qa(samples[4])}
    assert conv4[18].evidence == (
        "D1:14",
        "D2:7",
        "D4:7",
        "D5:15",
        "D11:26",
        "D20:21",
        "D26:36",
    )  # "D:11:26"
    conv6 = {q.index: q for q in locomo.load_qa(samples[6])}
    assert conv6[38].evidence == ("D18:1", "D18:7")  # D4:36 does not exist
    askers = [a for q in locomo.load_qa(samples[0]) for a in q.askers]
    assert (askers.count("Caroline"), askers.count("Melanie")) == (81, 87)  # 18 of 150 name neither


# -- the replay's extraction responder ---------------------------------------------------------


def _extraction_request(name: str, message: str) -> dict:
    prompt = (
        f"Current date: 2023-05-08 (Monday)\n<user_name>{name}</user_name>\n\n"
        f"NEW USER MESSAGE:\n<new_user_message>{message}</new_user_message>\n"
    )
    return {
        "model": "stub-model",
        "messages": [{"role": "system", "content": "rules"}, {"role": "user", "content": prompt}],
    }


def test_responder_answers_the_facts_due_at_the_turn() -> None:
    from bench.replay_locomo import LocomoResponder

    responder = LocomoResponder(locomo.build_replay_plan(SAMPLE, s) for s in ("Ann", "Bob"))
    answer = responder(_extraction_request("Ann", "Hi Bob\nLook [shares a photo of a cat]"))
    assert json.loads(answer) == {
        "operations": [
            {
                "op": "NEW",
                "content": "Ann has a cat.",
                "tags": [],
                "bank": "personal",
                "confidence": 0.9,
            },
            {
                "op": "NEW",
                "content": "Ann greets Bob.",
                "tags": [],
                "bank": "personal",
                "confidence": 0.9,
            },
        ]
    }
    assert json.loads(responder(_extraction_request("Ann", "  Bye "))) == {"operations": []}
    assert json.loads(responder(_extraction_request("Ann", "never said"))) == {"operations": []}
    # a repair request: the extraction prompt is no longer the last message
    repair = _extraction_request("Bob", "Nice\nReally")
    repair["messages"] += [
        {"role": "assistant", "content": "oops"},
        {"role": "user", "content": "Answer again with only JSON."},
    ]
    assert json.loads(responder(repair))["operations"][0]["content"] == "Bob says nice things."
    assert responder({"messages": [{"role": "user", "content": "hello"}]}) == "Okay."
    assert dict(responder.counts) == {
        "extraction": 4,
        "extraction_messages": 4,
        "facts_sent": 3,
        "unmatched": 1,
        "other": 1,
    }
    assert responder.unmatched == ["never said"]


def test_responder_answers_a_batch_message_by_message_and_summary_requests() -> None:
    from bench.replay_locomo import LocomoResponder

    responder = LocomoResponder(locomo.build_replay_plan(SAMPLE, s) for s in ("Ann", "Bob"))
    prompt = (
        "Current date: 2024-02-03 (Saturday)\n<user_name>Ann</user_name>\n\n"
        "NEW USER MESSAGES (2):\n"
        "[u1] 2023-05-08 (Monday)\n<new_user_message>Hi Bob\nLook [shares a photo of a "
        "cat]</new_user_message>\nASSISTANT REPLY (context only, never a fact about the "
        "user):\n<assistant_reply>Nice</assistant_reply>\n\n"
        "[u2] 2024-02-03 (Saturday)\n<new_user_message>Later</new_user_message>\n"
        "ASSISTANT REPLY (context only, never a fact about the user):\n"
        "<assistant_reply>Yes</assistant_reply>"
    )
    answer = json.loads(responder({"messages": [{"role": "user", "content": prompt}]}))
    assert [(op["message"], op["content"]) for op in answer["operations"]] == [
        ("u1", "Ann has a cat."),
        ("u1", "Ann greets Bob."),
        ("u2", "Ann spans sessions."),
    ]
    summary = (
        "Current date: 2024-02-03 (Saturday)\n\nSUMMARY SO FAR:\n"
        "<chat_summary>Ann: Hi Bob</chat_summary>\n\nNEW MESSAGES (2):\n<new_messages>\n"
        "[2024-02-03] Ann: Later\n[2024-02-03] assistant: Yes\n</new_messages>"
    )
    assert json.loads(responder({"messages": [{"role": "user", "content": summary}]})) == {
        "summary": "Ann: Hi Bob | Ann: Later"
    }
    assert dict(responder.counts) == {
        "extraction": 1,
        "extraction_messages": 2,
        "facts_sent": 3,
        "summary": 1,
    }


def test_a_question_is_a_hit_only_with_a_relevant_fact_verbatim() -> None:
    from bench.replay_locomo import score_question, summarize_answers

    plan = locomo.build_replay_plan(SAMPLE, "Ann")
    question = locomo.load_qa(SAMPLE)[2]  # q5: evidence D10:1, D10:2, D1:6
    hit = score_question(question, plan, "I recall:\n- [2024-02-03] Ann spans sessions.", 12.345)
    assert hit == {
        "index": 5,
        "category": 4,
        "speaker": "Ann",
        "evidence": ["D10:1", "D10:2", "D1:6"],
        "hit": True,
        "fact_available": True,
        "injected_chars": 44,
        "latency_ms": 12.35,
    }
    # a fact that is present but cites other turns does not count
    miss = score_question(question, plan, "- Ann has a cat.", 1.0)
    assert (miss["hit"], miss["fact_available"]) == (False, True)
    summary = summarize_answers([hit, miss])
    assert summary["overall"] == {"n": 2, "hits": 1, "hit_share": 0.5, "fact_available_share": 1.0}
    assert summary["by_category"]["4"] == {
        "name": "single-hop",
        "n": 2,
        "hits": 1,
        "hit_share": 0.5,
        "fact_available_share": 1.0,
    }
    assert summary["by_category"]["1"]["n"] == 0
