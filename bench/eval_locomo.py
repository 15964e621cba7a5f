"""Evaluate a model on LoCoMo through the real filter and service (`python -m service eval`).

One run, for each chosen conversation:

1. **Replay**: each speaker in turn is the Open WebUI user and the other speaker the assistant;
   each session is one saved chat whose turns go through the filter's inlet and outlet as Open
   WebUI calls them (`bench.chat_harness`), into a memory service started for the run
   (`bench.service_process`) whose `LLM_BASE_URL` is a metering relay to the extraction model
   (`bench.eval_proxy`). Then wait until the service has extracted every turn.
2. **Extraction quality**: each user's extracted memories against the dataset's observation
   facts about that speaker in the replayed sessions, matched one-to-one by cosine similarity
   of the service's embedding model (`bench.eval_scoring.MATCH_THRESHOLD`): precision (share of
   memories that state a fact), recall (share of facts stated by a memory), plus a sample,
   memories per session, parse failures, retries, tokens and seconds per turn.
3. **Answers**: each question of categories 1–4 whose evidence lies in the replayed sessions
   (at most `questions` per conversation, categories taken in turn) goes through the inlet as a
   new chat of its speaker; the answer model answers from the injected text only, the judge
   model grades it CORRECT/WRONG against the gold answer, and token F1 is computed.

Everything the run did is kept in `<out>/state.json` after each turn and each question, with the
service's database in `<out>/service/`: a stopped run (Ctrl-C, a crash, `stop_after_*`)
continues where it stopped when started again with the same settings. Results:
`<out>/results.json` and `<out>/results.md`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bench.chat_harness import (
    DEFAULT_FILTER_PATH,
    FilterHarness,
    SavedChat,
    load_filter_instance,
    set_valves,
)
from bench.eval_llm import ChatClient, Endpoint, EndpointFailed
from bench.eval_proxy import MeteringProxy
from bench.eval_scoring import (
    MATCH_THRESHOLD,
    answer_messages,
    clean_answer,
    judge_messages,
    match_memories,
    parse_verdict,
    summarize_answers,
    token_f1,
)
from bench.locomo import (
    QA_CATEGORIES,
    QAItem,
    ReplayPlan,
    build_replay_plan,
    load_conversations,
    load_qa,
    parse_session_date,
    speaker_facts,
    speakers,
)
from bench.service_process import ServiceClient, ServiceProcess, TurnObserver, free_port
from service.core.tokens import estimate_tokens

__all__ = [
    "EvalError",
    "EvalOptions",
    "Reporter",
    "StopRequested",
    "evaluate",
    "pick_questions",
    "render_markdown",
]

STATE_VERSION = 1
#: Completion limit of answer and judge calls: short answers are asked for, but a reasoning
#: model thinks first (a cut-off thought is read as no answer).
ANSWER_MAX_TOKENS = 512
#: Memory sources that are extraction output (not rolling chat summaries or manual edits).
EXTRACTED_SOURCES = ("extraction", "inference")


class EvalError(RuntimeError):
    """The evaluation cannot run as asked; the message says why in one sentence."""


class StopRequested(Exception):
    """Raised inside the run to stop it cleanly (the state is saved; a rerun continues)."""


class Reporter(Protocol):
    """Where the run reports progress (the CLI draws a progress bar)."""

    def phase(self, name: str, total: int | None, done: int = 0) -> None:
        """A new phase with `total` steps, `done` of them finished by an earlier run."""

    def advance(self) -> None:
        """One step of the current phase is finished."""

    def note(self, line: str) -> None:
        """A line worth printing."""


class QuietReporter:
    """A `Reporter` that keeps the notes and prints nothing (tests)."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.phases: list[tuple[str, int | None, int]] = []

    def phase(self, name: str, total: int | None, done: int = 0) -> None:
        self.phases.append((name, total, done))

    def advance(self) -> None:
        """Nothing to draw."""

    def note(self, line: str) -> None:
        self.notes.append(line)


@dataclass
class EvalOptions:
    """One evaluation's settings.

    Args:
        data: a LoCoMo JSON file (`locomo10.json`).
        out: the run directory (state, service database, results).
        extraction: the model the service extracts with (`json_mode` = `LLM_JSON_MODE`).
        answer: the model that answers the questions.
        judge: the model that grades the answers.
        conversations: 0-based sample indexes in `data`.
        sessions: replay only the first N sessions of each conversation (None = all).
        questions: at most N questions per conversation (None = all of categories 1–4).
        batch_messages: the service's `MEMORY_BATCH_MESSAGES` (None = its default, 5).
        quiet_s: the service's `MEMORY_BATCH_QUIET_S` (replayed chats go quiet at once).
        threshold: cosine similarity from which a memory states a fact.
        stand_in: the endpoints are the local stand-in (labelled so in the results).
        stop_after_turns / stop_after_questions: stop the run after this many turns / questions
            of this invocation (a later run continues).
        fresh: discard an earlier run's state in `out` instead of continuing it.
    """

    data: Path
    out: Path
    extraction: Endpoint
    answer: Endpoint
    judge: Endpoint
    conversations: Sequence[int] = (0,)
    sessions: int | None = None
    questions: int | None = 50
    batch_messages: int | None = None
    quiet_s: float = 10.0
    threshold: float = MATCH_THRESHOLD
    sample_size: int = 8
    stand_in: bool = False
    stop_after_turns: int | None = None
    stop_after_questions: int | None = None
    fresh: bool = False
    inlet_timeout_s: float = 10.0
    ready_timeout_s: float = 300.0
    drain_timeout_s: float = 3600.0
    filter_path: Path = DEFAULT_FILTER_PATH
    service_env: dict[str, str] = field(default_factory=dict)

    def service_settings(self) -> dict[str, str]:
        """The settings the run gives the service (besides URL, model, key and state)."""
        env = {
            "MEMORY_BATCH_QUIET_S": str(self.quiet_s),
            # a bit longer than the relay's own timeout, so a slow model shows as a timeout
            "LLM_TIMEOUT_S": str(self.extraction.timeout_s + 5),
            "LLM_JSON_MODE": "true" if self.extraction.json_mode else "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            # the inlet's own deadline (0.5 s in production) is meant for a busy chat; here
            # it would let the load of the machine, not the memories, decide what is injected
            "MEMORY_CONTEXT_DEADLINE_S": "5",
        }
        if self.batch_messages is not None:
            env["MEMORY_BATCH_MESSAGES"] = str(self.batch_messages)
        return env | self.service_env

    def describe(self, endpoint: Endpoint) -> dict[str, Any]:
        described = endpoint.describe()
        if self.stand_in:
            described |= {"kind": "stand-in", "base_url": "stand-in (testkit/llm_stub.py)"}
        return described


# -- state ------------------------------------------------------------------------------------


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _fingerprints(options: EvalOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the replay depends on, what the answers depend on)."""
    replay = {
        "data": _file_digest(options.data),
        "conversations": list(options.conversations),
        "sessions": options.sessions,
        "extraction": options.describe(options.extraction),
        "service": options.service_settings(),
    }
    answers = {
        "answer": options.describe(options.answer),
        "judge": options.describe(options.judge),
        "questions": options.questions,
        "threshold": options.threshold,
    }
    return replay, answers


class RunState:
    """`<out>/state.json`: what is done, saved atomically after each step."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def open(cls, options: EvalOptions, reporter: Reporter) -> RunState:
        """Continue the run in `options.out`, or start one.

        Raises:
            EvalError: when `out` holds a run with other replay settings (and not `fresh`).
        """
        path = options.out / "state.json"
        replay, answers = _fingerprints(options)
        if path.exists() and not options.fresh:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise EvalError(f"{path} is unreadable ({exc}); use --fresh") from exc
            if data.get("version") != STATE_VERSION or data.get("replay_fingerprint") != replay:
                raise EvalError(
                    f"{options.out} holds a run with other settings (data, conversations, "
                    "sessions, extraction model or service settings); use another --out or --fresh"
                )
            if data.get("answer_fingerprint") != answers:
                reporter.note("answer or judge settings changed: the questions are asked again")
                data["answer_fingerprint"] = answers
                data["answers"] = {}
            reporter.note(
                f"continuing the run in {options.out} "
                f"({data['turns_sent']} turns, {len(data['answers'])} questions done)"
            )
            data["resumes"] = int(data.get("resumes", 0)) + 1
            return cls(path, data)
        if options.fresh and (options.out / "service").exists():
            # the service's database and key go; its ONNX export of the embedding model stays
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            for entry in (options.out / "service").iterdir():
                if entry.name == "models":
                    continue
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink()
        options.out.mkdir(parents=True, exist_ok=True)
        data = {
            "version": STATE_VERSION,
            "replay_fingerprint": replay,
            "answer_fingerprint": answers,
            "started_at": _now(),
            "service_api_key": secrets.token_urlsafe(24),
            "chats": {},
            "turns_sent": 0,
            "replay_seconds": 0.0,
            "drain_seconds": 0.0,
            "drained": False,
            "relay": {},
            "relay_seen": [],
            "extraction_quality": None,
            "answers": {},
            "resumes": 0,
        }
        state = cls(path, data)
        state.save()
        return state

    def save(self) -> None:
        """Write the state to a temporary file, then rename it over the old one."""
        temporary = self.path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(self.data, indent=1, ensure_ascii=False), encoding="utf-8")
        os.replace(temporary, self.path)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- what is replayed and asked ---------------------------------------------------------------


@dataclass
class Conversation:
    """One chosen sample: its replay plans (sessions capped) and its questions."""

    index: int
    sample: dict[str, Any]
    plans: list[ReplayPlan]
    sessions: tuple[int, ...]  #: the replayed session numbers
    questions: list[QAItem]

    @property
    def conversation_id(self) -> str:
        return str(self.sample.get("sample_id", self.index))

    def user_id(self, speaker: str) -> str:
        return f"locomo-eval-{self.conversation_id}-{speaker}"

    def asked_at(self) -> int:
        """Epoch seconds of the question chats: a day after the last replayed session."""
        last = max(self.sessions)
        date = parse_session_date(self.sample["conversation"][f"session_{last}_date_time"])
        return int((date + timedelta(days=1)).timestamp())


def pick_questions(items: Sequence[QAItem], limit: int | None) -> list[QAItem]:
    """At most `limit` questions, the categories (1–4) taken in turn, each in dataset order."""
    by_category = {c: [q for q in items if q.category == c] for c in QA_CATEGORIES}
    picked: list[QAItem] = []
    while any(by_category.values()) and (limit is None or len(picked) < limit):
        for category in QA_CATEGORIES:
            if by_category[category] and (limit is None or len(picked) < limit):
                picked.append(by_category[category].pop(0))
    return picked


def _session_of(dia_id: str) -> int:
    return int(dia_id[1:].split(":", 1)[0])


def load_conversations_to_run(options: EvalOptions) -> list[Conversation]:
    """The chosen samples with their plans and questions.

    Raises:
        EvalError: a missing or unreadable data file, or an index out of range.
    """
    try:
        samples = load_conversations(options.data)
    except (OSError, ValueError) as exc:
        raise EvalError(f"cannot read the LoCoMo data {options.data}: {exc}") from exc
    chosen: list[Conversation] = []
    for index in options.conversations:
        if not 0 <= index < len(samples):
            raise EvalError(f"conversation {index} is out of range 0..{len(samples) - 1}")
        sample = samples[index]
        full = [build_replay_plan(sample, speaker) for speaker in speakers(sample)]
        numbers = sorted({s.session for plan in full for s in plan.sessions})
        kept = tuple(numbers[: options.sessions] if options.sessions else numbers)
        plans = [
            ReplayPlan(
                conversation_id=plan.conversation_id,
                speaker=plan.speaker,
                other=plan.other,
                sessions=tuple(s for s in plan.sessions if s.session in kept),
                facts=tuple(f for f in plan.facts if f.session in kept),
                facts_at=plan.facts_at,
            )
            for plan in full
        ]
        answerable = [q for q in load_qa(sample) if all(_session_of(d) in kept for d in q.evidence)]
        chosen.append(
            Conversation(
                index=index,
                sample=sample,
                plans=plans,
                sessions=kept,
                questions=pick_questions(answerable, options.questions),
            )
        )
    return chosen


# -- the run ----------------------------------------------------------------------------------


class Evaluation:
    """One invocation against a running service (see `evaluate`)."""

    def __init__(
        self,
        options: EvalOptions,
        state: RunState,
        conversations: list[Conversation],
        *,
        harness: FilterHarness,
        client: ServiceClient,
        observer: TurnObserver,
        relay: MeteringProxy,
        reporter: Reporter,
    ) -> None:
        self.options = options
        self.state = state
        self.conversations = conversations
        self.harness = harness
        self.client = client
        self.observer = observer
        self.relay = relay
        self.reporter = reporter
        self.turns_this_run = 0
        self.questions_this_run = 0

    def _save(self) -> None:
        self.state.data["relay"], self.state.data["relay_seen"] = self.relay.snapshot()
        self.state.save()

    def _users(self, conversation: Conversation) -> dict[str, dict[str, Any]]:
        return {
            plan.speaker: self.harness.make_user(
                user_id=conversation.user_id(plan.speaker), name=plan.speaker
            )
            for plan in conversation.plans
        }

    async def replay(self) -> None:
        """Send every turn not sent yet through the inlet and outlet, then wait for the drain."""
        data = self.state.data
        total = sum(len(p.groups) for c in self.conversations for p in c.plans)
        self.reporter.phase("replaying turns", total, data["turns_sent"])
        if data["turns_sent"] < total:
            started = time.monotonic()
            try:
                for conversation in self.conversations:
                    users = self._users(conversation)
                    for plan in conversation.plans:
                        for session in plan.sessions:
                            await self._replay_session(conversation, users[plan.speaker], session)
            finally:
                data["replay_seconds"] += time.monotonic() - started
                self._save()
        if not data["drained"]:
            self.reporter.phase("waiting for extraction", None)
            started = time.monotonic()
            drained, status = await self._wait_queue_empty()
            data["drain_seconds"] += time.monotonic() - started
            data["final_status"] = status
            if not drained:
                self._save()
                raise EvalError(
                    f"extraction had not finished after {self.options.drain_timeout_s:.0f} s "
                    f"(queued {status.get('turns_queued')}); run again to keep waiting"
                )
            data["drained"] = True
            self._save()

    async def _wait_queue_empty(self) -> tuple[bool, dict[str, Any]]:
        """Wait until the service has no turn waiting for extraction (`turns_queued == 0`; a
        turn is queued as soon as the outlet's POST is answered). Returns (drained, status).
        """
        baseline = await self.client.status()
        finished = int(baseline.get("turns_done", 0)) + int(baseline.get("turns_failed", 0))
        return await self.client.wait_drained(
            accepted=lambda: self.observer.accepted,
            baseline_finished=finished - self.observer.accepted,
            timeout_s=self.options.drain_timeout_s,
            progress=self.reporter.note,
            progress_every_s=30.0,
        )

    async def _replay_session(
        self, conversation: Conversation, user: dict[str, Any], session: Any
    ) -> None:
        key = f"{conversation.index}/{user['name']}/{session.session}"
        record = self.state.data["chats"].setdefault(key, {"chat_id": None, "sent": 0})
        chat = SavedChat(user=user, timestamp_s=int(session.date.timestamp()))
        if record["chat_id"] is None:
            record["chat_id"] = chat.chat_id
        chat.chat_id = record["chat_id"]
        if session.opening_text is not None:
            chat.add_assistant_opening(session.opening_text)
        for position, group in enumerate(session.groups):
            body, metadata, user_message_id, assistant_id = chat.inlet_request(group.user_text)
            if position < record["sent"]:  # sent by an earlier run: rebuild the branch only
                chat.record_turn(
                    user_message_id=user_message_id,
                    text=group.user_text,
                    assistant_id=assistant_id,
                    reply=group.reply_text,
                )
                continue
            if (
                self.options.stop_after_turns is not None
                and self.turns_this_run >= self.options.stop_after_turns
            ):
                # a planned pause lets the extractions in flight finish, so none is cut off
                # and asked again after the restart
                await self._wait_queue_empty()
                raise StopRequested(f"stopped after {self.turns_this_run} turns")
            await self.harness.inlet(chat, body, metadata)
            outlet_body = chat.record_turn(
                user_message_id=user_message_id,
                text=group.user_text,
                assistant_id=assistant_id,
                reply=group.reply_text,
            )
            await self.harness.outlet(chat, outlet_body, metadata)
            record["sent"] = position + 1
            self.state.data["turns_sent"] += 1
            self.turns_this_run += 1
            self._save()
            self.reporter.advance()

    async def extraction_quality(self, encode: Callable[[list[str]], np.ndarray]) -> None:
        """Match each user's memories to the speaker's facts (once, after the drain)."""
        data = self.state.data
        if data["extraction_quality"] is not None:
            return
        self.reporter.phase("matching memories to facts", None)
        session_of_chat = {
            record["chat_id"]: int(key.rsplit("/", 1)[1]) for key, record in data["chats"].items()
        }
        speakers_out: list[dict[str, Any]] = []
        for conversation in self.conversations:
            for plan in conversation.plans:
                _, items = await self.client.memories(conversation.user_id(plan.speaker))
                memories = [
                    m
                    for m in items
                    if m.get("source") in EXTRACTED_SOURCES and m.get("status") == "active"
                ]
                facts = [
                    f
                    for f in speaker_facts(conversation.sample, plan.speaker)
                    if f.session in conversation.sessions
                ]
                speakers_out.append(
                    _match_speaker(
                        conversation,
                        plan,
                        memories,
                        facts,
                        encode=encode,
                        threshold=self.options.threshold,
                        session_of_chat=session_of_chat,
                    )
                )
        data["extraction_quality"] = speakers_out
        self._save()

    async def answer_questions(self, answer: ChatClient, judge: ChatClient) -> None:
        """Ask every question not answered yet; each is saved as soon as it is judged."""
        answers = self.state.data["answers"]
        total = sum(len(c.questions) for c in self.conversations)
        self.reporter.phase("answering questions", total, len(answers))
        for conversation in self.conversations:
            users = self._users(conversation)
            for item in conversation.questions:
                key = f"{conversation.index}:{item.index}"
                if key in answers:
                    continue
                if (
                    self.options.stop_after_questions is not None
                    and self.questions_this_run >= self.options.stop_after_questions
                ):
                    raise StopRequested(f"stopped after {self.questions_this_run} questions")
                # asked as the first speaker its text names (bench.locomo: never the one who
                # spoke the evidence, which a deployment cannot know)
                asker = users[item.askers[0]]
                chat = SavedChat(user=asker, timestamp_s=conversation.asked_at())
                body, metadata, _, _ = chat.inlet_request(item.question)
                inlet = await self.harness.inlet(chat, body, metadata)
                answers[key] = await _answer_one(
                    conversation, item, inlet.system_text, answer=answer, judge=judge
                )
                self.questions_this_run += 1
                self._save()
                self.reporter.advance()


async def _answer_one(
    conversation: Conversation,
    item: QAItem,
    injected: str,
    *,
    answer: ChatClient,
    judge: ChatClient,
) -> dict[str, Any]:
    """One question's record: answer, verdict, F1, tokens, tries."""
    record: dict[str, Any] = {
        "conversation": conversation.conversation_id,
        "index": item.index,
        "category": item.category,
        "question": item.question,
        "gold": item.answer,
        "context_tokens": estimate_tokens(injected),
        "answer": "",
        "answer_error": None,
        "answer_tries": 0,
        "answer_failures": [],
        "verdict": None,
        "verdict_unreadable": False,
        "judge_error": None,
        "judge_tries": 0,
        "judge_failures": [],
        "correct": False,
        "f1": 0.0,
        "tokens": {
            "answer_prompt": 0,
            "answer_completion": 0,
            "judge_prompt": 0,
            "judge_completion": 0,
        },
    }
    try:
        reply = await answer.complete(
            answer_messages(item.question, injected), max_tokens=ANSWER_MAX_TOKENS
        )
    except EndpointFailed as exc:
        record |= {
            "answer_error": exc.reason,
            "answer_tries": exc.attempts,
            "answer_failures": exc.failures,
        }
        return record
    text = clean_answer(reply.text)
    record |= {
        "answer": text,
        "answer_tries": reply.attempts,
        "answer_failures": reply.failures,
        "f1": round(token_f1(text, item.answer), 4),
    }
    record["tokens"] |= {
        "answer_prompt": reply.prompt_tokens,
        "answer_completion": reply.completion_tokens,
    }
    try:
        graded = await judge.complete(
            judge_messages(item.question, item.answer, text), max_tokens=ANSWER_MAX_TOKENS
        )
    except EndpointFailed as exc:
        record |= {
            "judge_error": exc.reason,
            "judge_tries": exc.attempts,
            "judge_failures": exc.failures,
        }
        return record
    verdict = parse_verdict(graded.text)
    record |= {
        "verdict": None if verdict is None else ("CORRECT" if verdict else "WRONG"),
        "verdict_unreadable": verdict is None,
        "correct": bool(verdict),
        "judge_tries": graded.attempts,
        "judge_failures": graded.failures,
    }
    if verdict is None:
        record["judge_reply"] = graded.text[:300]
    record["tokens"] |= {
        "judge_prompt": graded.prompt_tokens,
        "judge_completion": graded.completion_tokens,
    }
    return record


def _match_speaker(
    conversation: Conversation,
    plan: ReplayPlan,
    memories: list[dict[str, Any]],
    facts: list[Any],
    *,
    encode: Callable[[list[str]], np.ndarray],
    threshold: float,
    session_of_chat: dict[str, int],
) -> dict[str, Any]:
    texts = [str(m.get("content", "")) for m in memories]
    fact_texts = [f.text for f in facts]
    memory_vectors, fact_vectors = encode(texts), encode(fact_texts)
    similarity = (
        memory_vectors @ fact_vectors.T
        if texts and fact_texts
        else np.zeros((len(texts), len(fact_texts)), dtype=np.float32)
    )
    matches, best_memory, best_fact = match_memories(similarity, threshold)
    matched_memories = {m.memory for m in matches}
    matched_facts = {m.fact for m in matches}
    per_session: dict[str, int] = {str(s): 0 for s in sorted({s.session for s in plan.sessions})}
    for memory in memories:
        session = session_of_chat.get(str(memory.get("source_chat_id")))
        if session is not None:
            per_session[str(session)] = per_session.get(str(session), 0) + 1
    return {
        "conversation": conversation.conversation_id,
        "speaker": plan.speaker,
        "user_id": conversation.user_id(plan.speaker),
        "turns": len(plan.groups),
        "sessions": len(plan.sessions),
        "memories": len(memories),
        "facts": len(facts),
        "matched": len(matches),
        "memories_per_session": per_session,
        "matches": [
            {"memory": texts[m.memory], "fact": fact_texts[m.fact], "similarity": m.similarity}
            for m in matches
        ],
        "unmatched_memories": [
            {"memory": texts[i], "best_similarity": best_memory[i]}
            for i in range(len(texts))
            if i not in matched_memories
        ],
        "missed_facts": [
            {"fact": fact_texts[i], "best_similarity": best_fact[i]}
            for i in range(len(fact_texts))
            if i not in matched_facts
        ],
    }


# -- wiring -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _running_service(
    options: EvalOptions, state: RunState, relay: MeteringProxy, reporter: Reporter
) -> Iterator[ServiceProcess]:
    service = ServiceProcess(
        state_dir=options.out / "service",
        port=free_port(),
        api_key=state.data["service_api_key"],
        llm_base_url=relay.base_url,
        llm_model=options.extraction.model,
        log_path=options.out / "service.log",
        env=options.service_settings(),
    )
    reporter.note(f"starting the memory service on {service.url} (log {service.log_path})")
    service.start()
    try:
        try:
            service.wait_ready(options.ready_timeout_s)
        except RuntimeError as exc:
            raise EvalError(str(exc)) from exc
        yield service
    finally:
        service.terminate()
        service.stop_leftover_postgres()


def evaluate(
    options: EvalOptions,
    reporter: Reporter,
    *,
    encoder: Any = None,
) -> dict[str, Any] | None:
    """Run (or continue) the evaluation; returns the results, or None when it was stopped.

    Args:
        encoder: a `service.embeddings.encoder.Encoder` to reuse (tests); None loads the
            bundled model, exported once into the run's service folder.

    Raises:
        EvalError: bad settings, a service that does not start, a drain that times out.
    """
    # The filter (in this process) and the service talk over 127.0.0.1; a proxy set in the
    # caller's environment must not see that traffic.
    loopback = "127.0.0.1,localhost"
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = ",".join(filter(None, (os.environ.get(name), loopback)))
    conversations = load_conversations_to_run(options)
    if not any(c.questions for c in conversations) and options.questions != 0:
        reporter.note("no question has all its evidence in the replayed sessions")
    state = RunState.open(options, reporter)
    if encoder is None:
        # exported into the service's own model folder: the service then loads it, not again
        from service.embeddings.encoder import Encoder

        reporter.note("loading the embedding model")
        encoder = Encoder(onnx_dir=options.out / "service" / "models")
    relay = MeteringProxy(
        options.extraction.base_url,
        api_key=options.extraction.api_key,
        timeout_s=options.extraction.timeout_s,
        seed=state.data["relay"],
        seen=state.data["relay_seen"],
    ).start()
    observer = TurnObserver()
    try:
        with _running_service(options, state, relay, reporter) as service:
            instance = load_filter_instance(options.filter_path)
            set_valves(
                instance,
                {
                    "service_url": service.url,
                    "api_key": state.data["service_api_key"],
                    "inlet_timeout_s": options.inlet_timeout_s,
                    "outlet_timeout_s": max(10.0, options.inlet_timeout_s),
                },
            )
            observer.install()
            try:
                asyncio.run(
                    _run(
                        options,
                        state,
                        conversations,
                        instance,
                        service,
                        observer,
                        relay,
                        reporter,
                        encoder,
                    )
                )
            finally:
                observer.uninstall()
    except StopRequested as stop:
        reporter.note(f"{stop}; run the same command again to continue")
        return None
    finally:
        # calls the service made after the last save (up to its shutdown) count too
        state.data["relay"], state.data["relay_seen"] = relay.snapshot()
        state.save()
        relay.stop()
    results = build_results(options, state, conversations)
    (options.out / "results.json").write_text(
        json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (options.out / "results.md").write_text(render_markdown(results), encoding="utf-8")
    return results


async def _run(
    options: EvalOptions,
    state: RunState,
    conversations: list[Conversation],
    instance: Any,
    service: ServiceProcess,
    observer: TurnObserver,
    relay: MeteringProxy,
    reporter: Reporter,
    encoder: Any,
) -> None:
    client = ServiceClient(service.url, state.data["service_api_key"])
    answer, judge = ChatClient(options.answer), ChatClient(options.judge)
    run = Evaluation(
        options,
        state,
        conversations,
        harness=FilterHarness(instance),
        client=client,
        observer=observer,
        relay=relay,
        reporter=reporter,
    )
    try:
        await run.replay()
        await run.extraction_quality(encoder.encode_sync)
        await run.answer_questions(answer, judge)
    finally:
        await client.aclose()
        await answer.aclose()
        await judge.aclose()


# -- results ----------------------------------------------------------------------------------


def _ratio(part: float, whole: float, digits: int = 4) -> float | None:
    return round(part / whole, digits) if whole else None


def build_results(
    options: EvalOptions, state: RunState, conversations: list[Conversation]
) -> dict[str, Any]:
    """The results document (JSON-ready): models, settings, extraction and answer figures."""
    data = state.data
    quality = data["extraction_quality"] or []
    relay = data["relay"]
    turns = int(data["turns_sent"])
    memories = sum(s["memories"] for s in quality)
    facts = sum(s["facts"] for s in quality)
    matched = sum(s["matched"] for s in quality)
    sessions = sum(s["sessions"] for s in quality)
    order = [f"{c.index}:{q.index}" for c in conversations for q in c.questions]
    answers = [data["answers"][key] for key in order if key in data["answers"]]
    status = data.get("final_status") or {}

    def calls(prefix: str) -> dict[str, Any]:
        failures = [f for a in answers for f in a[f"{prefix}_failures"]]
        return {
            "calls": sum(1 for a in answers if a[f"{prefix}_tries"]),
            "retries": sum(max(0, a[f"{prefix}_tries"] - 1) for a in answers),
            "timeouts": failures.count("timeout"),
            "failed": sum(a[f"{prefix}_error"] is not None for a in answers),
            "http_errors": sum(f.startswith("http ") for f in failures),
            "prompt_tokens": sum(a["tokens"][f"{prefix}_prompt"] for a in answers),
            "completion_tokens": sum(a["tokens"][f"{prefix}_completion"] for a in answers),
        }

    llm_seconds = relay.get("milliseconds", 0) / 1000.0
    wall_seconds = float(data["replay_seconds"]) + float(data["drain_seconds"])
    return {
        "benchmark": "locomo-eval",
        "date": _now(),
        "started_at": data["started_at"],
        "resumed": data.get("resumes", 0),
        "data": options.data.name,
        "conversations": [
            {"index": c.index, "id": c.conversation_id, "sessions": list(c.sessions)}
            for c in conversations
        ],
        "models": {
            "extraction": options.describe(options.extraction),
            "answer": options.describe(options.answer),
            "judge": options.describe(options.judge),
        },
        "stand_in": options.stand_in,
        "settings": {
            "service": options.service_settings(),
            "sessions": options.sessions,
            "questions_per_conversation": options.questions,
            "match_threshold": options.threshold,
            "inlet_timeout_s": options.inlet_timeout_s,
        },
        "extraction": {
            "turns": turns,
            "sessions": sessions,
            "turns_done": status.get("turns_done"),
            "turns_failed": status.get("turns_failed"),
            "memories": memories,
            "facts": facts,
            "matched": matched,
            "precision": _ratio(matched, memories),
            "recall": _ratio(matched, facts),
            "memories_per_session": _ratio(memories, sessions, 2),
            "llm": {
                "requests": relay.get("requests", 0),
                "extraction_calls": relay.get("extraction", 0),
                "summary_calls": relay.get("summary", 0),
                "other_calls": relay.get("other", 0),
                "repair_retries": relay.get("repair", 0),
                "repeated_after_failure": relay.get("repeated", 0),
                "parse_failures": relay.get("parse_failures", 0),
                "timeouts": relay.get("timeouts", 0),
                "http_errors": relay.get("http_errors", 0),
                "connection_errors": relay.get("connection_errors", 0),
                "prompt_tokens": relay.get("prompt_tokens", 0),
                "completion_tokens": relay.get("completion_tokens", 0),
                "tokens_estimated_answers": relay.get("tokens_estimated", 0),
                "tokens_per_turn": _ratio(
                    relay.get("prompt_tokens", 0) + relay.get("completion_tokens", 0), turns, 1
                ),
            },
            "seconds_per_turn_llm": _ratio(llm_seconds, turns, 3),
            "seconds_per_turn_wall": _ratio(wall_seconds, turns, 3),
            "wall_seconds": round(wall_seconds, 1),
            "by_speaker": [
                {
                    k: v
                    for k, v in s.items()
                    if k not in ("matches", "unmatched_memories", "missed_facts")
                }
                | {
                    "precision": _ratio(s["matched"], s["memories"]),
                    "recall": _ratio(s["matched"], s["facts"]),
                }
                for s in quality
            ],
            "sample": {
                "matches": [m for s in quality for m in s["matches"]][: options.sample_size],
                "unmatched_memories": [m for s in quality for m in s["unmatched_memories"]][
                    : options.sample_size
                ],
                "missed_facts": [m for s in quality for m in s["missed_facts"]][
                    : options.sample_size
                ],
            },
        },
        "qa": {
            **summarize_answers(answers),
            "answer_calls": calls("answer"),
            "judge_calls": calls("judge"),
        },
        "questions": answers,
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _num(value: Any) -> str:
    return "–" if value is None else str(value)


def render_markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: who and how, extraction figures, a sample, answer figures."""
    models = results["models"]
    extraction = results["extraction"]
    llm = extraction["llm"]
    qa = results["qa"]
    conversations = ", ".join(
        f"{c['id']} (sessions {c['sessions'][0]}–{c['sessions'][-1]})" if c["sessions"] else c["id"]
        for c in results["conversations"]
    )
    lines = [
        f"# Model evaluation on LoCoMo — {results['date']}",
        "",
    ]
    if results["stand_in"]:
        lines += [
            "**Stand-in run**: every model below is the local stand-in "
            "(`testkit/llm_stub.py`), which writes the dataset's own facts and answers "
            "a question's gold answer when the injected memories hold a fact drawn from its "
            'evidence (else "unknown"). These figures prove the harness, not a model.',
            "",
        ]
    lines += [
        "| role | model | endpoint | timeout | JSON mode |",
        "|---|---|---|---:|---|",
    ]
    for role in ("extraction", "answer", "judge"):
        m = models[role]
        lines.append(
            f"| {role} | {m['model']} | {m['kind']} | {m['timeout_s']:g} s | "
            f"{'on' if m['json_mode'] else 'off'} |"
        )
    settings = results["settings"]
    lines += [
        "",
        f"Data: {results['data']}, {conversations}; at most "
        f"{_num(settings['questions_per_conversation'])} questions per conversation; "
        f"service settings: "
        + ", ".join(
            f"{k}={v}" for k, v in settings["service"].items() if k.startswith(("MEMORY", "LLM"))
        )
        + f"; match threshold {settings['match_threshold']}.",
        "",
        "## Extraction",
        "",
        "| figure | value |",
        "|---|---|",
        f"| turns replayed / extracted / failed | {extraction['turns']} / "
        f"{_num(extraction['turns_done'])} / {_num(extraction['turns_failed'])} |",
        f"| memories written | {extraction['memories']} "
        f"({_num(extraction['memories_per_session'])} per session) |",
        f"| observation facts | {extraction['facts']} |",
        f"| precision (memories that state a fact) | {_pct(extraction['precision'])} |",
        f"| recall (facts stated by a memory) | {_pct(extraction['recall'])} |",
        f"| LLM calls: extraction / repair retries / repeated after a failure / summary / other "
        f"| {llm['extraction_calls']} / {llm['repair_retries']} / "
        f"{llm['repeated_after_failure']} / {llm['summary_calls']} / {llm['other_calls']} |",
        f"| parse failures (prose instead of JSON) | {llm['parse_failures']} |",
        f"| timeouts / HTTP errors / connection errors | {llm['timeouts']} / "
        f"{llm['http_errors']} / {llm['connection_errors']} |",
        f"| tokens: prompt / completion (per turn) | {llm['prompt_tokens']} / "
        f"{llm['completion_tokens']} ({_num(llm['tokens_per_turn'])}) |",
        f"| seconds per turn: in the model / wall clock | "
        f"{_num(extraction['seconds_per_turn_llm'])} / "
        f"{_num(extraction['seconds_per_turn_wall'])} |",
        "",
        "| speaker | sessions | turns | memories | facts | precision | recall | "
        "memories per session |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in extraction["by_speaker"]:
        per_session = " ".join(f"{k}:{v}" for k, v in s["memories_per_session"].items())
        lines.append(
            f"| {s['conversation']} {s['speaker']} | {s['sessions']} | {s['turns']} | "
            f"{s['memories']} | {s['facts']} | {_pct(s['precision'])} | {_pct(s['recall'])} | "
            f"{per_session} |"
        )
    sample = extraction["sample"]
    lines += ["", "Sample of matches (memory ← fact, similarity):", ""]
    lines += [f"- {m['memory']} ← {m['fact']} ({m['similarity']:.2f})" for m in sample["matches"]]
    lines += ["", "Memories that state no fact (best similarity):", ""]
    lines += [
        f"- {m['memory']} ({m['best_similarity']:.2f})" for m in sample["unmatched_memories"]
    ] or ["- none"]
    lines += ["", "Facts no memory states (best similarity):", ""]
    lines += [f"- {m['fact']} ({m['best_similarity']:.2f})" for m in sample["missed_facts"]] or [
        "- none"
    ]
    lines += [
        "",
        "## Answers",
        "",
        "| category | questions | judged correct | accuracy | token F1 | context tokens "
        "| unanswered | verdict unreadable |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [(f"{k} {v['name']}", v) for k, v in qa["by_category"].items()]
    rows.append(("**overall**", qa["overall"]))
    for name, row in rows:
        f1 = "–" if row["f1"] is None else f"{row['f1']:.3f}"
        lines.append(
            f"| {name} | {row['n']} | {row['correct']} | {_pct(row['accuracy'])} | {f1} | "
            f"{_num(row['context_tokens'])} | {row['unanswered']} | {row['verdict_unreadable']} |"
        )
    for role in ("answer", "judge"):
        c = qa[f"{role}_calls"]
        lines.append(
            f"\n{role.title()} model: {c['calls']} calls, {c['retries']} retries "
            f"({c['timeouts']} timeouts, {c['http_errors']} HTTP errors), {c['failed']} failed "
            f"after every try; {c['prompt_tokens']} prompt and {c['completion_tokens']} "
            "completion tokens."
        )
    return "\n".join(lines) + "\n"
