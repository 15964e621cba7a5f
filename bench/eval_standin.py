"""The stand-in model of the evaluation: one local OpenAI-compatible responder that plays
extractor, answer model and judge, so the harness can be run and tested without a model.

Its figures prove the harness, not a model: as extractor it writes exactly the dataset's
observation facts (`bench.replay_locomo.LocomoResponder`), as answer model it answers the
dataset's gold answer — always, or (`answers="notes"`, what `make eval` uses) only when the
injected memory notes hold a fact drawn from the question's evidence, or (`answers="wrong"`)
never — and as judge it grades by token overlap. Results of a run on it say so
(`endpoint kind: stand-in`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from bench.eval_scoring import normalize_answer, token_f1, verdict_json
from bench.locomo import build_replay_plan, load_qa, speakers
from bench.replay_locomo import LocomoResponder

__all__ = ["PROSE_REPLY", "WRONG_ANSWER", "StandIn", "question_of"]

#: What a rambling model says instead of JSON (no braces at all).
PROSE_REPLY = (
    "Sure! Here is what I noticed about the user: they talked about their week and some plans. "
    "Let me know if you would like me to format this differently."
)
#: The answer of the model that is wrong on purpose (shares no word with any gold answer of
#: the test sample or of conv-26).
WRONG_ANSWER = "purple submarine"

_QUESTION = re.compile(r"<question>(.*?)</question>", re.DOTALL)
_REFERENCE = re.compile(r"<reference_answer>(.*?)</reference_answer>", re.DOTALL)
_USER_NAME = re.compile(r"<user_name>(.*?)</user_name>", re.DOTALL)
_CANDIDATE = re.compile(r"<answer_to_grade>(.*?)</answer_to_grade>", re.DOTALL)


def _last_text(request: Mapping[str, Any]) -> str:
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    return str(messages[-1].get("content", "")) if messages else ""


def question_of(request: Mapping[str, Any]) -> str | None:
    """The question of an answer request (None for other requests)."""
    last = _last_text(request)
    if "<reference_answer>" in last:
        return None
    found = _QUESTION.search(last)
    return found.group(1).strip() if found else None


def fair_verdict(gold: str, answer: str) -> bool:
    """The stand-in judge: CORRECT when token F1 ≥ 0.5 or every gold word is in the answer."""
    gold_words = set(normalize_answer(gold))
    return token_f1(answer, gold) >= 0.5 or (
        bool(gold_words) and gold_words <= set(normalize_answer(answer))
    )


class StandIn:
    """A responder for `testkit.llm_stub.LLMStub`.

    Args:
        samples: the LoCoMo samples being evaluated (their turns, facts and gold answers).
        extraction: "facts" writes the observation facts due at each turn; "prose" answers
            `PROSE_REPLY` to every extraction (and repair) request.
        answers: "gold" answers the gold answer; "notes" answers it only when the memory notes
            hold, verbatim, an observation fact drawn from one of the question's evidence
            turns, else "unknown" (so accuracy follows what the inlet injected); "wrong"
            answers `WRONG_ANSWER`.
        judge: "fair" grades with `fair_verdict`; "prose" answers a sentence without verdict.
    """

    def __init__(
        self,
        samples: Iterable[Mapping[str, Any]],
        *,
        extraction: Literal["facts", "prose"] = "facts",
        answers: Literal["gold", "notes", "wrong"] = "gold",
        judge: Literal["fair", "prose"] = "fair",
    ) -> None:
        samples = list(samples)
        # one extractor per conversation: LocomoResponder knows turns by their dia_id, which
        # repeats from one conversation to the next ("D1:3" is in every one of them)
        self.extractors: dict[str, LocomoResponder] = {}
        for sample in samples:
            responder = LocomoResponder(
                build_replay_plan(sample, speaker) for speaker in speakers(sample)
            )
            for speaker in speakers(sample):
                self.extractors.setdefault(speaker, responder)
        self.gold: dict[str, str] = {
            str(qa["question"]).strip(): str(qa.get("answer", ""))
            for sample in samples
            for qa in sample.get("qa") or []
        }
        #: question → the facts (of the speakers it names) drawn from one of its evidence turns
        self.relevant: dict[str, tuple[str, ...]] = {}
        for sample in samples:
            plans = {speaker: build_replay_plan(sample, speaker) for speaker in speakers(sample)}
            for item in load_qa(sample):
                evidence = set(item.evidence)
                self.relevant[item.question.strip()] = tuple(
                    " ".join(fact.text.split())
                    for asker in item.askers
                    for fact in plans[asker].facts
                    if evidence.intersection(fact.dia_ids)
                )
        self.extraction = extraction
        self.answers = answers
        self.judge = judge

    def __call__(self, request: dict[str, Any]) -> str:
        last = _last_text(request)
        if "<reference_answer>" in last:
            return self._judge(last)
        question = question_of(request)
        if question is not None:
            if self.answers == "wrong":
                return WRONG_ANSWER
            if self.answers == "notes":
                notes = " ".join(str(request["messages"][0].get("content", "")).split())
                if not any(fact in notes for fact in self.relevant.get(question, ())):
                    return "unknown"
            return self.gold.get(question, "unknown")
        if self.extraction == "prose" and "<chat_summary>" not in last:
            return PROSE_REPLY
        return self._extractor(request)(request)

    def _extractor(self, request: Mapping[str, Any]) -> LocomoResponder:
        """The extractor of the conversation whose speaker the request names (else the first;
        two conversations with a speaker of the same name share the first one's).
        """
        text = "\n".join(
            str(m.get("content", "")) for m in request.get("messages") or [] if isinstance(m, dict)
        )
        found = _USER_NAME.search(text)
        name = found.group(1).strip() if found else ""
        return self.extractors.get(name) or next(iter(self.extractors.values()))

    def _judge(self, prompt: str) -> str:
        if self.judge == "prose":
            return "The answer seems to be in the right direction, more or less."
        gold = _REFERENCE.search(prompt)
        answer = _CANDIDATE.search(prompt)
        return verdict_json(
            fair_verdict(gold.group(1) if gold else "", answer.group(1) if answer else "")
        )
