"""LoCoMo data helpers for the replay benchmark: turns, sessions, facts and questions (no I/O
beyond reading the JSON file, no network).

Source data: `locomo10.json` of the LoCoMo data set (Maharana et al., ACL 2024; CC BY-NC 4.0),
shipped at `../shared/data/locomo/locomo10.json` next to this repository. One sample is

    {"sample_id": "conv-26",
     "conversation": {"speaker_a": "Caroline", "speaker_b": "Melanie",
                      "session_1_date_time": "1:56 pm on 8 May, 2023",
                      "session_1": [{"speaker", "dia_id": "D1:1", "text"[, "blip_caption"]}, ...],
                      ...},
     "observation": {"session_1_observation": {"Caroline": [[fact, "D1:3" | [ids]], ...], ...}},
     "qa": [{"question", "answer", "evidence": ["D1:3", ...], "category": 1..5}, ...]}

Evidence ids are cleaned as in `../shared/bench/LOCOMO.md`, protocol step 3.

A replay is seen from one speaker: that speaker is the chat user and the other speaker plays the
assistant. Each session becomes one chat whose user turns are the speaker's turns and whose
replies are the other speaker's turns that follow them.
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "CATEGORY_NAMES",
    "DEFAULT_DATA_PATH",
    "QA_CATEGORIES",
    "REPO_ROOT",
    "Fact",
    "QAItem",
    "ReplayPlan",
    "SessionPlan",
    "Turn",
    "TurnGroup",
    "assign_facts",
    "build_replay_plan",
    "conversation_turns",
    "known_dia_ids",
    "last_session_date",
    "load_conversation",
    "load_conversations",
    "load_qa",
    "normalize_dia_id",
    "normalize_evidence",
    "parse_session_date",
    "session_numbers",
    "speaker_facts",
    "speakers",
    "turn_text",
]

#: The repository root (this file is `<root>/bench/locomo.py`).
REPO_ROOT = Path(__file__).resolve().parents[1]
#: `../shared/data/locomo/locomo10.json` relative to the repository root.
DEFAULT_DATA_PATH = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"

#: LoCoMo's category integers (not in the paper's order; LOCOMO.md step 5).
CATEGORY_NAMES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
#: Categories that are measured; 5 (adversarial) has a false premise by design.
QA_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)

_SESSION_KEY = re.compile(r"session_(\d+)")
_OBSERVATION_KEY = re.compile(r"session_(\d+)_observation")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_ID_SEPARATORS = re.compile(r"[;,\s]+")
_SESSION_DATE = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*",
    re.IGNORECASE,
)
_MONTHS = (
    {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
    | {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
    | {"sept": 9}
)


# -- records ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    """One dialogue turn."""

    dia_id: str  #: "D<session>:<n>", e.g. "D1:3"
    session: int  #: session number (1-based)
    speaker: str  #: the speaker's name as in the data
    text: str  #: the turn's text, plus " [shares <blip_caption>]" when it shares an image


@dataclass(frozen=True, slots=True)
class TurnGroup:
    """One replayed exchange: the speaker's turn(s), then the other speaker's reply turn(s)."""

    session: int  #: session number
    user_turns: tuple[Turn, ...]  #: consecutive turns of the replayed speaker (one in LoCoMo)
    reply_turns: tuple[Turn, ...]  #: the other speaker's turns up to the speaker's next turn

    @property
    def key(self) -> str:
        """The dia_id of the first user turn; identifies the group within a conversation."""
        return self.user_turns[0].dia_id

    @property
    def user_text(self) -> str:
        """The user message: the user turns' texts joined by newlines."""
        return "\n".join(turn.text for turn in self.user_turns)

    @property
    def reply_text(self) -> str:
        """The assistant reply: the reply turns' texts joined by newlines ("" when none)."""
        return "\n".join(turn.text for turn in self.reply_turns)

    @property
    def dia_ids(self) -> tuple[str, ...]:
        """Every dia_id in the group, user turns first."""
        return tuple(t.dia_id for t in self.user_turns + self.reply_turns)


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """One session replayed as one saved chat."""

    session: int  #: session number
    date_time: str  #: the raw date string, e.g. "1:56 pm on 8 May, 2023"
    date: datetime  #: `date_time` parsed, timezone UTC
    opening: tuple[Turn, ...]  #: other-speaker turns before the speaker's first turn
    groups: tuple[TurnGroup, ...]  #: the exchanges, in order

    @property
    def opening_text(self) -> str | None:
        """The initial assistant message of the chat, or None when the speaker opens."""
        return "\n".join(t.text for t in self.opening) if self.opening else None


@dataclass(frozen=True, slots=True)
class Fact:
    """One `observation` fact about a speaker."""

    text: str  #: the fact sentence, verbatim from the data
    dia_ids: tuple[str, ...]  #: the cited turns, normalised, only ids that exist
    session: int  #: the observation's session number
    speaker: str  #: whom the fact is about


@dataclass(frozen=True, slots=True)
class QAItem:
    """One question with cleaned evidence."""

    index: int  #: position in the sample's `qa` list
    question: str  #: verbatim
    answer: str  #: the gold answer as text
    category: int  #: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop
    evidence: tuple[str, ...]  #: normalised evidence dia_ids, at least one
    askers: tuple[str, ...]  #: speakers the question names (both when it names neither)


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """Everything needed to replay one conversation from one speaker's side."""

    conversation_id: str  #: the sample_id, e.g. "conv-26"
    speaker: str  #: the replayed speaker (the chat user)
    other: str  #: the other speaker (plays the assistant)
    sessions: tuple[SessionPlan, ...]  #: sessions with at least one user turn, numeric order
    facts: tuple[Fact, ...]  #: every observation fact about `speaker`
    #: group key → the facts to extract at that group (each fact at most once)
    facts_at: Mapping[str, tuple[Fact, ...]] = field(default_factory=dict)

    @property
    def groups(self) -> tuple[TurnGroup, ...]:
        """All turn groups of all sessions, in replay order."""
        return tuple(group for session in self.sessions for group in session.groups)

    @property
    def assigned_facts(self) -> tuple[Fact, ...]:
        """The facts that some group hands to extraction, in replay order."""
        return tuple(fact for group in self.groups for fact in self.facts_at.get(group.key, ()))


# -- loading ----------------------------------------------------------------------------------


def load_conversations(path: str | Path = DEFAULT_DATA_PATH) -> list[dict[str, Any]]:
    """All samples of a LoCoMo JSON file (10 for `locomo10.json`)."""
    with Path(path).open(encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, list):
        raise ValueError(f"{path} does not hold a list of LoCoMo samples")
    return data


def load_conversation(path: str | Path = DEFAULT_DATA_PATH, index: int = 0) -> dict[str, Any]:
    """One sample by position (0-based) in the file.

    Raises:
        IndexError: when `index` is out of range.
    """
    samples = load_conversations(path)
    if not 0 <= index < len(samples):
        raise IndexError(f"conversation {index} is out of range 0..{len(samples) - 1}")
    return samples[index]


def speakers(sample: Mapping[str, Any]) -> tuple[str, str]:
    """(speaker_a, speaker_b) of a sample."""
    conversation = sample["conversation"]
    return str(conversation["speaker_a"]), str(conversation["speaker_b"])


def session_numbers(sample: Mapping[str, Any]) -> list[int]:
    """Numbers of the sessions that have turns, in numeric order (not key order: 10 after 9).

    Some samples carry `session_N_date_time` keys for sessions without turns; those are skipped.
    """
    conversation = sample["conversation"]
    numbers = [
        int(match.group(1))
        for key, value in conversation.items()
        if (match := _SESSION_KEY.fullmatch(key)) and isinstance(value, list) and value
    ]
    return sorted(numbers)


def parse_session_date(text: str) -> datetime:
    """Parse a LoCoMo session date such as "1:56 pm on 8 May, 2023" into a UTC datetime.

    The data gives no time zone; the wall-clock time is taken as UTC.

    Raises:
        ValueError: when the text does not have that shape.
    """
    match = _SESSION_DATE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a LoCoMo session date: {text!r}")
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        raise ValueError(f"unknown month {month_name!r} in {text!r}")
    hour_24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    return datetime(int(year), month, int(day), hour_24, int(minute), tzinfo=UTC)


def last_session_date(sample: Mapping[str, Any]) -> datetime:
    """The date of the last session that has turns (UTC)."""
    last = session_numbers(sample)[-1]
    return parse_session_date(sample["conversation"][f"session_{last}_date_time"])


def turn_text(raw_turn: Mapping[str, Any]) -> str:
    """A turn's text plus " [shares <blip_caption>]" when it shares an image (LOCOMO.md step 1)."""
    text = str(raw_turn.get("text") or "")
    caption = raw_turn.get("blip_caption")
    return f"{text} [shares {caption}]" if caption else text


def conversation_turns(sample: Mapping[str, Any]) -> list[Turn]:
    """Every turn of a sample, sessions in numeric order, turns in order."""
    conversation = sample["conversation"]
    return [
        Turn(
            dia_id=str(raw["dia_id"]),
            session=number,
            speaker=str(raw["speaker"]),
            text=turn_text(raw),
        )
        for number in session_numbers(sample)
        for raw in conversation[f"session_{number}"]
    ]


def known_dia_ids(sample: Mapping[str, Any]) -> set[str]:
    """The dia_ids that exist in a sample."""
    return {turn.dia_id for turn in conversation_turns(sample)}


# -- evidence ids -----------------------------------------------------------------------------


def normalize_dia_id(raw: str) -> str | None:
    """One id in canonical form: "D:11:26" → "D11:26", "D30:05" → "D30:5"; None if malformed."""
    match = _DIA_ID.fullmatch(raw.strip())
    if match is None:
        return None
    return f"D{int(match.group(1))}:{int(match.group(2))}"


def normalize_evidence(
    raw: str | Iterable[str], known_ids: Collection[str] | None = None
) -> tuple[str, ...]:
    """Clean evidence ids as in LOCOMO.md step 3.

    Each string is split on ";", "," and whitespace; "D:11:26" becomes "D11:26"; leading zeros
    are stripped ("D30:05" → "D30:5"); malformed ids and, when `known_ids` is given, ids that
    do not exist in the conversation are dropped. Order of first appearance is kept, repeats
    are removed.

    Args:
        raw: one evidence string or a list of them (observation facts use both shapes).
        known_ids: the conversation's dia_ids (`known_dia_ids`), or None to keep every
            well-formed id.
    """
    strings = [raw] if isinstance(raw, str) else list(raw)
    cleaned: dict[str, None] = {}
    for text in strings:
        for token in _ID_SEPARATORS.split(str(text)):
            dia_id = normalize_dia_id(token) if token else None
            if dia_id is not None and (known_ids is None or dia_id in known_ids):
                cleaned[dia_id] = None
    return tuple(cleaned)


# -- facts ------------------------------------------------------------------------------------


def speaker_facts(sample: Mapping[str, Any], speaker: str) -> list[Fact]:
    """The `observation` facts about `speaker`, sessions in numeric order, facts in order.

    Each fact's cited ids are normalised with `normalize_evidence` against the sample's ids, so
    a fact may end up citing nothing.
    """
    known = known_dia_ids(sample)
    observations = sample.get("observation") or {}
    numbered = sorted(
        (int(match.group(1)), value)
        for key, value in observations.items()
        if (match := _OBSERVATION_KEY.fullmatch(key))
    )
    facts: list[Fact] = []
    for number, by_speaker in numbered:
        for entry in by_speaker.get(speaker, []):
            text, cited = entry[0], entry[1]
            facts.append(
                Fact(
                    text=str(text),
                    dia_ids=normalize_evidence(cited, known),
                    session=number,
                    speaker=speaker,
                )
            )
    return facts


def assign_facts(groups: Sequence[TurnGroup], facts: Iterable[Fact]) -> dict[str, tuple[Fact, ...]]:
    """Decide at which turn group each fact is "extracted".

    A fact goes to the group holding the last (in conversation order) of its cited ids that lie
    in one of `groups`; a fact citing no id in any group is not assigned. Each fact is
    therefore returned at most once, and only once everything it rests on has been said.

    Returns:
        group key → facts in their input order; groups without facts are absent.
    """
    position = {dia_id: index for index, group in enumerate(groups) for dia_id in group.dia_ids}
    assigned: dict[str, list[Fact]] = {}
    for fact in facts:
        places = [position[dia_id] for dia_id in fact.dia_ids if dia_id in position]
        if places:
            assigned.setdefault(groups[max(places)].key, []).append(fact)
    return {key: tuple(value) for key, value in assigned.items()}


# -- the replay plan --------------------------------------------------------------------------


def _group_session(turns: Sequence[Turn], speaker: str) -> tuple[tuple[Turn, ...], list[TurnGroup]]:
    """Split one session's turns into (opening turns, groups) for `speaker`."""
    index = 0
    while index < len(turns) and turns[index].speaker != speaker:
        index += 1
    opening = tuple(turns[:index])
    groups: list[TurnGroup] = []
    while index < len(turns):
        start = index
        while index < len(turns) and turns[index].speaker == speaker:
            index += 1
        user_end = index
        while index < len(turns) and turns[index].speaker != speaker:
            index += 1
        groups.append(
            TurnGroup(
                session=turns[start].session,
                user_turns=tuple(turns[start:user_end]),
                reply_turns=tuple(turns[user_end:index]),
            )
        )
    return opening, groups


def build_replay_plan(sample: Mapping[str, Any], speaker: str) -> ReplayPlan:
    """The replay of one sample from `speaker`'s side, with the facts to extract at each turn.

    Sessions without any turn of `speaker` are left out (there is no user turn to replay).

    Raises:
        ValueError: when `speaker` is not one of the sample's two speakers.
    """
    speaker_a, speaker_b = speakers(sample)
    if speaker not in (speaker_a, speaker_b):
        raise ValueError(f"{speaker!r} is not a speaker of {sample.get('sample_id')}")
    other = speaker_b if speaker == speaker_a else speaker_a
    conversation = sample["conversation"]
    by_session: dict[int, list[Turn]] = {}
    for turn in conversation_turns(sample):
        by_session.setdefault(turn.session, []).append(turn)
    sessions: list[SessionPlan] = []
    for number, turns in by_session.items():
        opening, groups = _group_session(turns, speaker)
        if not groups:
            continue
        date_time = str(conversation[f"session_{number}_date_time"])
        sessions.append(
            SessionPlan(
                session=number,
                date_time=date_time,
                date=parse_session_date(date_time),
                opening=opening,
                groups=tuple(groups),
            )
        )
    facts = speaker_facts(sample, speaker)
    all_groups = [group for session in sessions for group in session.groups]
    return ReplayPlan(
        conversation_id=str(sample.get("sample_id", "")),
        speaker=speaker,
        other=other,
        sessions=tuple(sessions),
        facts=tuple(facts),
        facts_at=assign_facts(all_groups, facts),
    )


# -- questions --------------------------------------------------------------------------------


def load_qa(sample: Mapping[str, Any], categories: Collection[int] = QA_CATEGORIES) -> list[QAItem]:
    """The sample's questions of `categories` with cleaned evidence (LOCOMO.md step 3).

    Questions left without evidence are dropped. Each question is asked by the speakers its
    text names (`askers_of`), never by who spoke the evidence: a deployment cannot know that.
    """
    pair = speakers(sample)
    spoken_by = {turn.dia_id: turn.speaker for turn in conversation_turns(sample)}
    items: list[QAItem] = []
    for index, raw in enumerate(sample.get("qa") or []):
        category = int(raw["category"])
        if category not in categories:
            continue
        evidence = normalize_evidence(raw.get("evidence") or [], spoken_by)
        if not evidence:
            continue
        answer = raw.get("answer", raw.get("adversarial_answer", ""))
        items.append(
            QAItem(
                index=index,
                question=str(raw["question"]),
                answer=str(answer),
                category=category,
                evidence=evidence,
                askers=askers_of(str(raw["question"]), pair),
            )
        )
    return items


def askers_of(question: str, pair: Sequence[str]) -> tuple[str, ...]:
    """The speakers of `pair` whose name the question mentions as a whole word (in `pair`
    order), or the whole pair when it mentions neither ("Caroline's" names Caroline,
    "Annabel" does not name Ann).
    """
    named = tuple(s for s in pair if re.search(rf"\b{re.escape(s)}\b", question))
    return named or tuple(pair)
