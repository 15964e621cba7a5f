"""Replay one LoCoMo conversation through the memory filter and service, then ask its questions.

    python -m bench.replay_locomo --conversation 0                 # starts everything itself
    python -m bench.replay_locomo --conversation 0 --extraction per-turn
    python -m bench.replay_locomo --conversation 0 --restart-after-turns 100
    python -m bench.replay_locomo --service-url URL --api-key KEY  # a service already running

Default mode starts the OpenAI-compatible stub (`testkit/llm_stub.py`) with a LoCoMo
responder and the memory service (`python -m service serve`) on a fresh state directory. Each
speaker in turn is the Open WebUI user (`locomo-<sample_id>-<speaker>`) and the other speaker
plays the assistant; each session is one saved chat. Every user turn goes through the filter's
inlet and outlet exactly as Open WebUI 0.12.4 calls them (`bench/chat_harness.py`).

The responder plays a perfect extractor: asked to extract from a batch of user messages, it
answers the LoCoMo `observation` facts due at each of those turns (`bench.locomo.assign_facts`)
as NEW operations naming their message. So what is measured is the memory pipeline (batching,
storage, recall, ranking, budget), not an LLM. Rolling chat summary requests get a short
summary built from the new messages; they are counted apart.

`--extraction batched` (default) runs the service with its default batch thresholds (5 user
messages or 1,000 estimated tokens per batch, rolling summaries from 2,000 tokens) and a quiet
period of `--quiet-s` seconds (default 10 instead of 300: the replay sends a session's turns
back to back, so each session is one burst and its chat goes quiet after its last turn; a
shorter period only shortens the wait). `--extraction per-turn` runs one extraction per turn
and no summaries (MEMORY_BATCH_MESSAGES=1, MEMORY_CHAT_SUMMARY_TOKENS=0). Every LLM request
the stub receives is counted by kind.

Then every question of categories 1–4 goes through the inlet as a new saved chat of each
speaker its text names (both speakers when it names neither; never who spoke its evidence),
dated one day after the last session; each asking is one row of the results. An asking is a
hit when the injected system text contains, verbatim, a fact whose cited turns intersect the
question's evidence.

Results: `bench/results/replay_locomo_conv<N>[_per_turn][_summary<T>][_restart<K>].json` and
`.md`; the Markdown table is also printed. The exit code is 1 when extraction did not drain, a
turn was lost or a memory is stored twice.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.chat_harness import (
    DEFAULT_FILTER_PATH,
    MODEL_ID,
    FilterHarness,
    SavedChat,
    load_filter_instance,
    set_valves,
)
from bench.locomo import (
    CATEGORY_NAMES,
    DEFAULT_DATA_PATH,
    QA_CATEGORIES,
    REPO_ROOT,
    QAItem,
    ReplayPlan,
    TurnGroup,
    build_replay_plan,
    last_session_date,
    load_conversation,
    load_qa,
    speakers,
)
from bench.service_process import (
    ServiceClient,
    ServiceProcess,
    ServiceStartError,
    TurnObserver,
    free_port,
)
from testkit.llm_stub import LLMStub

__all__ = ["LocomoResponder", "main", "render_markdown", "user_id_for"]

DEFAULT_OUT_DIR = REPO_ROOT / "bench" / "results"
PLAIN_REPLY = "Okay."
_NEW_USER_MESSAGE = re.compile(r"<new_user_message>(.*?)</new_user_message>", re.DOTALL)
#: a new message of a batch: "[u2] 2023-05-08 (Monday)" then the quoted message
_BATCH_MESSAGE = re.compile(
    r"^\[(u\d+)\] (\d{4}-\d{2}-\d{2})[^\n]*\n<new_user_message>(.*?)</new_user_message>",
    re.DOTALL | re.MULTILINE,
)
_USER_NAME = re.compile(r"<user_name>(.*?)</user_name>", re.DOTALL)
_SUMMARY_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2}\] ([^:\n]+): (.*)$", re.MULTILINE)
SUMMARY_ITEM_CHARS = 60
SUMMARY_MAX_CHARS = 700
EXTRACTION_MODES = {
    # MEMORY_BATCH_QUIET_S is added from --quiet-s
    "batched": {},
    "per-turn": {"MEMORY_BATCH_MESSAGES": "1", "MEMORY_CHAT_SUMMARY_TOKENS": "0"},
}


def user_id_for(conversation_id: str, speaker: str) -> str:
    """The Open WebUI user id of a replayed speaker, e.g. "locomo-conv-26-Caroline"."""
    return f"locomo-{conversation_id}-{speaker}"


def _normalized(text: str) -> str:
    """NFC with runs of whitespace collapsed, so the service's trimming cannot break a lookup."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class LocomoResponder:
    """The LLM stub's responder for a LoCoMo replay.

    An extraction request is recognised by `<new_user_message>…</new_user_message>` in the last
    message that has it (the service's prompt, `service/core/extraction.py`); the user is named
    in `<user_name>…</user_name>`. Each new message of the batch (`[u<k>] <date>` above it) is
    found by speaker, exact text and date, and the answer is
    `{"operations": [{"op": "NEW", "message": "u<k>", "content": fact, "tags": [],
    "bank": "personal", "confidence": 0.9}, …]}` with the facts of every message, or
    `{"operations": []}`. A rolling chat summary request (`<chat_summary>`,
    `service/core/chat_summary.py`) gets `{"summary": …}`: the summary so far and the start of
    each new user message. Any other request gets `PLAIN_REPLY`. Thread-safe: the stub calls
    it from several threads.
    """

    def __init__(self, plans: Iterable[ReplayPlan]) -> None:
        #: speaker → normalised user text → groups with that text, in replay order
        self._lookup: dict[str, dict[str, list[TurnGroup]]] = {}
        self._facts_at: dict[str, tuple[str, ...]] = {}
        self._date_of: dict[str, str] = {}  #: group key → its session's date, "YYYY-MM-DD"
        for plan in plans:
            by_text = self._lookup.setdefault(plan.speaker, {})
            for session in plan.sessions:
                for group in session.groups:
                    self._date_of[group.key] = f"{session.date:%Y-%m-%d}"
            for group in plan.groups:
                by_text.setdefault(_normalized(group.user_text), []).append(group)
            for key, facts in plan.facts_at.items():
                self._facts_at[key] = tuple(fact.text for fact in facts)
        self._served: set[str] = set()
        self._lock = threading.Lock()
        #: extraction (requests) / extraction_messages / facts_sent / unmatched / summary / other
        self.counts: Counter[str] = Counter()
        self.unmatched: list[str] = []  #: first texts that matched no turn (for diagnosis)

    def __call__(self, request: dict[str, Any]) -> str:
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        prompt = next(
            (
                text
                for m in reversed(messages)
                if "<new_user_message>" in (text := _message_text(m.get("content")))
            ),
            None,
        )
        if prompt is None:
            last = _message_text(messages[-1].get("content")) if messages else ""
            if "<chat_summary>" in last:
                return self._summary(last)
            with self._lock:
                self.counts["other"] += 1
            return PLAIN_REPLY
        name_match = _USER_NAME.search(prompt)
        name = name_match.group(1).strip() if name_match else ""
        batch: list[tuple[str | None, str | None, str]] = [
            (m.group(1), m.group(2), m.group(3)) for m in _BATCH_MESSAGE.finditer(prompt)
        ]
        if not batch and (single := _NEW_USER_MESSAGE.search(prompt)) is not None:
            batch = [(None, None, single.group(1))]
        with self._lock:
            self.counts["extraction"] += 1
        operations = []
        for ref, date, text in batch:
            for fact in self._facts_for(name, _normalized(text), date) or ():
                operation = {
                    "op": "NEW",
                    "content": fact,
                    "tags": [],
                    "bank": "personal",
                    "confidence": 0.9,
                }
                operations.append({**operation, "message": ref} if ref else operation)
        return json.dumps({"operations": operations}, ensure_ascii=False)

    def _summary(self, prompt: str) -> str:
        """A summary answer: the summary so far, then the start of each new user message."""
        with self._lock:
            self.counts["summary"] += 1
        previous = prompt.split("<chat_summary>", 1)[1].split("</chat_summary>", 1)[0]
        block = prompt.split("<new_messages>", 1)[-1]
        items = [
            f"{speaker}: {text[:SUMMARY_ITEM_CHARS]}"
            for speaker, text in _SUMMARY_LINE.findall(block)
            if speaker != "assistant"
        ]
        summary = " | ".join(part for part in (previous, *items) if part)
        return json.dumps({"summary": summary[-SUMMARY_MAX_CHARS:]}, ensure_ascii=False)

    def _facts_for(self, name: str, text: str, date: str | None) -> tuple[str, ...] | None:
        """Facts due at the turn with this speaker, text and date; None when no turn matches."""
        with self._lock:
            self.counts["extraction_messages"] += 1
            names = [name] if name in self._lookup else list(self._lookup)
            candidates = [g for n in names for g in self._lookup[n].get(text, [])]
            if date is not None:
                # batches of different chats are extracted out of replay order: the session's
                # date tells repeated texts ("See you!") apart
                candidates = [
                    g for g in candidates if self._date_of.get(g.key) == date
                ] or candidates
            if not candidates:
                self.counts["unmatched"] += 1
                if len(self.unmatched) < 20:
                    self.unmatched.append(text[:200])
                return None
            # Repeated texts are served in replay order; a retried job after the last one gets
            # the last one again.
            group = next((g for g in candidates if g.key not in self._served), candidates[-1])
            self._served.add(group.key)
            facts = self._facts_at.get(group.key, ())
            self.counts["facts_sent"] += len(facts)
            return facts


def _percentiles_ms(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None}
    p50, p95 = np.percentile(np.asarray(values, dtype=float), [50, 95])
    return {"n": len(values), "p50": round(float(p50), 2), "p95": round(float(p95), 2)}


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Replay:
    """One replay run against a service that is already up (see `main`)."""

    def __init__(
        self,
        *,
        sample: dict[str, Any],
        harness: FilterHarness,
        client: ServiceClient,
        observer: TurnObserver,
        service: ServiceProcess | None,
        restart_after_turns: int | None,
        ready_timeout_s: float,
        drain_timeout_s: float,
        save_context: bool = False,
    ) -> None:
        self.sample = sample
        self.conversation_id = str(sample.get("sample_id", ""))
        self.plans = [build_replay_plan(sample, speaker) for speaker in speakers(sample)]
        self.questions = load_qa(sample)
        self.harness = harness
        self.client = client
        self.observer = observer
        self.service = service
        self.restart_after_turns = restart_after_turns
        self.ready_timeout_s = ready_timeout_s
        self.drain_timeout_s = drain_timeout_s
        self.save_context = save_context
        self.users = {
            plan.speaker: harness.make_user(
                user_id=user_id_for(self.conversation_id, plan.speaker), name=plan.speaker
            )
            for plan in self.plans
        }
        self.restarts: list[dict[str, Any]] = []

    async def run(self) -> dict[str, Any]:
        """Replay all turns, wait for extraction, ask all questions; return the results."""
        baseline = await self.client.status()
        baseline_done = int(baseline.get("turns_done", 0))
        baseline_finished = baseline_done + int(baseline.get("turns_failed", 0))
        for speaker, user in self.users.items():
            total, _ = await self.client.memories(user["id"])
            if total:
                _progress(f"warning: {speaker} ({user['id']}) already has {total} memories")

        started = time.monotonic()
        inlet_ms, turns = await self._replay_turns()
        replay_s = time.monotonic() - started
        drain_started = time.monotonic()
        drained, status = await self.client.wait_drained(
            accepted=lambda: self.observer.accepted,
            baseline_finished=baseline_finished,
            timeout_s=self.drain_timeout_s,
            progress=_progress,
        )
        extraction_s = time.monotonic() - started
        drain_s = time.monotonic() - drain_started

        per_speaker: dict[str, dict[str, Any]] = {}
        for plan in self.plans:
            total, items = await self.client.memories(self.users[plan.speaker]["id"])
            contents = Counter(_normalized(str(item.get("content", ""))) for item in items)
            per_speaker[plan.speaker] = {
                "user_id": self.users[plan.speaker]["id"],
                "sessions": len(plan.sessions),
                "turns": len(plan.groups),
                "facts": len(plan.facts),
                "facts_handed_out": len(plan.assigned_facts),
                "memories_stored": total,
                "duplicate_memories": sum(n - 1 for n in contents.values() if n > 1),
                "questions": sum(plan.speaker in q.askers for q in self.questions),
            }

        _progress(f"asking {len(self.questions)} questions")
        answers = await self._ask_questions()
        accepted = self.observer.accepted
        done = int(status.get("turns_done", 0)) - baseline_done
        failed = int(status.get("turns_failed", 0)) - (baseline_finished - baseline_done)
        return {
            "conversation_id": self.conversation_id,
            "speakers": per_speaker,
            "turns_replayed": turns,
            "turns_accepted": accepted,
            "turn_answers": dict(self.observer.answers),
            "turns_done": done,
            "turns_failed": failed,
            "lost_turns": max(0, accepted - done),
            "duplicate_memories": sum(s["duplicate_memories"] for s in per_speaker.values()),
            "memories_stored": sum(s["memories_stored"] for s in per_speaker.values()),
            "restarts": self.restarts,
            "extraction": {
                "drained": drained,
                "wall_s": round(extraction_s, 2),
                "replay_s": round(replay_s, 2),
                "drain_wait_s": round(drain_s, 2),
                "final_status": status,
            },
            "latency_ms": {
                "qa_inlet": _percentiles_ms([a["latency_ms"] for a in answers]),
                "replay_inlet": _percentiles_ms(inlet_ms),
            },
            "qa": summarize_answers(answers),
            "questions": answers,
        }

    async def _replay_turns(self) -> tuple[list[float], int]:
        inlet_ms: list[float] = []
        turns = 0
        total = sum(len(plan.groups) for plan in self.plans)
        for plan in self.plans:
            user = self.users[plan.speaker]
            for session in plan.sessions:
                chat = SavedChat(user=user, timestamp_s=int(session.date.timestamp()))
                if session.opening_text is not None:
                    chat.add_assistant_opening(session.opening_text)
                for group in session.groups:
                    body, metadata, user_message_id, assistant_id = chat.inlet_request(
                        group.user_text
                    )
                    inlet = await self.harness.inlet(chat, body, metadata)
                    inlet_ms.append(inlet.elapsed_ms)
                    outlet_body = chat.record_turn(
                        user_message_id=user_message_id,
                        text=group.user_text,
                        assistant_id=assistant_id,
                        reply=group.reply_text,
                    )
                    await self.harness.outlet(chat, outlet_body, metadata)
                    turns += 1
                    if turns % 50 == 0 or turns == total:
                        _progress(
                            f"replay: {turns}/{total} turns ({plan.speaker}, session "
                            f"{session.session}); accepted {self.observer.accepted}"
                        )
                    if turns == self.restart_after_turns:
                        await self._restart(turns)
        return inlet_ms, turns

    async def _restart(self, turns: int) -> None:
        """SIGKILL the service and start it again on the same state directory."""
        if self.service is None:
            return
        await self.observer.wait_idle(timeout_s=30.0)
        status = await self.client.status()
        _progress(f"restart: SIGKILL after {turns} turns (queued={status.get('turns_queued')})")
        self.service.kill()
        self.service.start()
        ready_s = await asyncio.to_thread(self.service.wait_ready, self.ready_timeout_s)
        _progress(f"restart: ready again after {ready_s:.1f} s")
        self.restarts.append(
            {
                "after_turns": turns,
                "queued_at_kill": status.get("turns_queued"),
                "ready_s": round(ready_s, 2),
            }
        )

    async def _ask_questions(self) -> list[dict[str, Any]]:
        asked_at = int((last_session_date(self.sample) + timedelta(days=1)).timestamp())
        plans = {plan.speaker: plan for plan in self.plans}
        answers: list[dict[str, Any]] = []
        for item in self.questions:
            # asked by whom its text names, both speakers when it names neither (LOCOMO.md:
            # no gold at query time); each asking is scored on its own
            for asker in item.askers:
                plan = plans[asker]
                chat = SavedChat(user=self.users[asker], timestamp_s=asked_at)
                body, metadata, _user_message_id, _assistant_id = chat.inlet_request(item.question)
                inlet = await self.harness.inlet(chat, body, metadata)
                answer = score_question(item, plan, inlet.system_text, inlet.elapsed_ms)
                if self.save_context:
                    answer["injected"] = inlet.system_text
                answers.append(answer)
        return answers


def score_question(
    item: QAItem, plan: ReplayPlan, injected: str, latency_ms: float
) -> dict[str, Any]:
    """One question's record: hit when a relevant handed-out fact appears verbatim."""
    evidence = set(item.evidence)
    relevant = [fact for fact in plan.assigned_facts if evidence.intersection(fact.dia_ids)]
    return {
        "index": item.index,
        "category": item.category,
        "speaker": plan.speaker,
        "evidence": list(item.evidence),
        "hit": any(fact.text in injected for fact in relevant),
        "fact_available": bool(relevant),
        "injected_chars": len(injected),
        "latency_ms": round(latency_ms, 2),
    }


def summarize_answers(answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per category (1–4) and overall: n, hits, hit share, share with a relevant fact."""

    def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        n = len(rows)
        hits = sum(bool(r["hit"]) for r in rows)
        available = sum(bool(r["fact_available"]) for r in rows)
        return {
            "n": n,
            "hits": hits,
            "hit_share": round(hits / n, 4) if n else None,
            "fact_available_share": round(available / n, 4) if n else None,
        }

    by_category = {
        str(category): {
            "name": CATEGORY_NAMES[category],
            **summary([a for a in answers if a["category"] == category]),
        }
        for category in QA_CATEGORIES
    }
    return {"by_category": by_category, "overall": summary(answers)}


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def render_markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: a QA table per category, then the run's figures."""
    qa = results["qa"]
    lines = [
        f"# LoCoMo replay: {results['conversation_id']} (conversation {results['conversation']})",
        "",
        f"Mode: {results['mode']}; extraction: {results.get('extraction_mode', '–')}; "
        f"restart after turns: {results['restart_after_turns'] or '–'};"
        f" started {results['started_at']}.",
        "",
        "| category | n | hit share | relevant fact handed out |",
        "|---|---:|---:|---:|",
    ]
    for key, row in qa["by_category"].items():
        lines.append(
            f"| {key} {row['name']} | {row['n']} | {_share(row['hit_share'])} | "
            f"{_share(row['fact_available_share'])} |"
        )
    overall = qa["overall"]
    lines += [
        f"| **overall** | {overall['n']} | {_share(overall['hit_share'])} | "
        f"{_share(overall['fact_available_share'])} |",
        "",
        "| figure | value |",
        "|---|---|",
    ]
    latency = results["latency_ms"]
    extraction = results["extraction"]
    memories = ", ".join(
        f"{name} {s['memories_stored']}" for name, s in results["speakers"].items()
    )
    restarts = (
        "; ".join(
            f"SIGKILL after {r['after_turns']} turns, ready again in {r['ready_s']} s"
            for r in results["restarts"]
        )
        or "none"
    )
    calls = results.get("llm_requests") or {}
    extraction_calls = calls.get("extraction", 0)
    rows = [
        ("turns replayed", results["turns_replayed"]),
        (
            "LLM calls: extraction / chat summary / other (core profiles)",
            f"{extraction_calls} / {calls.get('summary', 0)} / {calls.get('other', 0)}"
            + (
                f" ({calls.get('extraction_messages', 0) / extraction_calls:.2f} user messages per "
                "extraction call)"
                if extraction_calls
                else ""
            )
            if calls
            else "–",
        ),
        (
            "turns accepted / done / failed",
            f"{results['turns_accepted']} / {results['turns_done']} / {results['turns_failed']}",
        ),
        ("memories stored", f"{results['memories_stored']} ({memories})"),
        (
            "inlet latency p50 / p95, questions",
            f"{_ms(latency['qa_inlet']['p50'])} / {_ms(latency['qa_inlet']['p95'])} ms",
        ),
        (
            "inlet latency p50 / p95, replayed turns",
            f"{_ms(latency['replay_inlet']['p50'])} / {_ms(latency['replay_inlet']['p95'])} ms",
        ),
        (
            "extraction wall time (first turn → drained)",
            f"{extraction['wall_s']:.1f} s (replay {extraction['replay_s']:.1f} s, "
            f"drain wait {extraction['drain_wait_s']:.1f} s"
            f"{'' if extraction['drained'] else ', NOT drained'})",
        ),
        ("service restarts", restarts),
        ("lost turns", results["lost_turns"]),
        ("duplicate memories", results["duplicate_memories"]),
    ]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.replay_locomo",
        description="Replay a LoCoMo conversation through the memory filter and service.",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA_PATH,
        help="locomo10.json (default: ../shared/data/locomo/ from the repo root)",
    )
    parser.add_argument("--conversation", type=int, default=0, help="0-based index (default 0)")
    parser.add_argument("--service-url", help="use this running service instead of starting one")
    parser.add_argument("--api-key", help="MEMORY_API_KEY of --service-url")
    parser.add_argument(
        "--extraction",
        choices=sorted(EXTRACTION_MODES),
        default="batched",
        help="batched (the service's default thresholds) or per-turn "
        "(one extraction per turn, no chat summaries)",
    )
    parser.add_argument(
        "--quiet-s",
        type=float,
        default=10.0,
        help="MEMORY_BATCH_QUIET_S of the started service (seconds, default 10)",
    )
    parser.add_argument(
        "--chat-summary-tokens",
        type=int,
        default=None,
        metavar="N",
        help="MEMORY_CHAT_SUMMARY_TOKENS of the started service (default: the "
        "service's; LoCoMo's sessions stay below its 2,000)",
    )
    parser.add_argument(
        "--restart-after-turns",
        type=int,
        default=None,
        metavar="N",
        help="SIGKILL and restart the service after N user turns",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT_DIR,
        help="results directory (default: bench/results)",
    )
    parser.add_argument(
        "--filter",
        type=Path,
        default=DEFAULT_FILTER_PATH,
        dest="filter_path",
        help="the filter file (default: filter/memory_filter.py)",
    )
    parser.add_argument(
        "--ready-timeout-s",
        type=float,
        default=300.0,
        help="deadline for GET /readyz after each start (seconds)",
    )
    parser.add_argument(
        "--drain-timeout-s",
        type=float,
        default=1800.0,
        help="deadline for extraction to drain after the last turn (seconds)",
    )
    parser.add_argument(
        "--save-context",
        action="store_true",
        help="keep each question's injected system text in the JSON results",
    )
    parser.add_argument(
        "--keep-state", action="store_true", help="keep the service's temporary state directory"
    )
    args = parser.parse_args(argv)
    if args.service_url and not args.api_key:
        parser.error("--service-url needs --api-key")
    if args.service_url and args.restart_after_turns is not None:
        parser.error("--restart-after-turns needs the service started by the replay")
    if args.restart_after_turns is not None and args.restart_after_turns < 1:
        parser.error("--restart-after-turns must be at least 1")
    if args.service_url and args.chat_summary_tokens is not None:
        parser.error("--chat-summary-tokens needs the service started by the replay")
    if args.quiet_s <= 0:
        parser.error("--quiet-s must be positive")
    return args


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the replay; returns the process exit code."""
    args = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    sample = load_conversation(args.data, args.conversation)
    started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    observer = TurnObserver()
    service_env: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        try:
            service: ServiceProcess | None = None
            responder: LocomoResponder | None = None
            if args.service_url:
                url, api_key = args.service_url.rstrip("/"), args.api_key
            else:
                responder, service, service_env = _spawn_service(sample, args, stack)
                url, api_key = service.url, service.api_key
            instance = _filter_for(args, url, api_key)
            observer.install()
            stack.callback(observer.uninstall)
            results = asyncio.run(_run(sample, instance, url, api_key, observer, service, args))
        except ServiceStartError as exc:
            _progress(f"error: {exc}")
            return 2
        except KeyboardInterrupt:
            _progress("interrupted; stopping everything")
            return 130
        if responder is not None:
            results["llm_requests"] = dict(responder.counts)
            results["unmatched_extraction_texts"] = responder.unmatched
    data = os.path.relpath(args.data.resolve(), REPO_ROOT)
    results = {
        "benchmark": "locomo-replay",
        "conversation": args.conversation,
        "data": data,
        "mode": "external" if args.service_url else "spawned",
        "extraction_mode": "external" if args.service_url else args.extraction,
        "service_settings": service_env,
        "service_url": url,
        "restart_after_turns": args.restart_after_turns,
        "started_at": started_at,
        **results,
    }
    markdown = render_markdown(results)
    stem = _output_stem(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(
        json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (args.out / f"{stem}.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    _progress(f"wrote {args.out / stem}.json and .md")
    problems = _problems(results)
    for problem in problems:
        _progress(f"FAIL: {problem}")
    return 1 if problems else 0


def _spawn_service(
    sample: dict[str, Any], args: argparse.Namespace, stack: contextlib.ExitStack
) -> tuple[LocomoResponder, ServiceProcess, dict[str, str]]:
    """Start the stand-in LLM and a memory service on a free port, both stopped by `stack`;
    returns the stand-in's responder, the ready service and the service's settings.
    """
    responder = LocomoResponder(build_replay_plan(sample, speaker) for speaker in speakers(sample))
    stub = LLMStub(responder).start()
    stack.callback(stub.stop)
    state_dir = Path(tempfile.mkdtemp(prefix="locomo-replay-"))
    if args.keep_state:
        _progress(f"state directory kept at {state_dir}")
    else:
        stack.callback(shutil.rmtree, state_dir, ignore_errors=True)
    service_env = {
        "MEMORY_BATCH_QUIET_S": str(args.quiet_s),
        **EXTRACTION_MODES[args.extraction],
    }
    if args.chat_summary_tokens is not None:
        service_env["MEMORY_CHAT_SUMMARY_TOKENS"] = str(args.chat_summary_tokens)
    service = ServiceProcess(
        state_dir=state_dir,
        port=free_port(),
        api_key=secrets.token_urlsafe(24),
        llm_base_url=stub.base_url,
        llm_model=MODEL_ID,
        log_path=state_dir / "service.log",
        env=service_env,
    )
    stack.callback(_stop_service, service)
    _progress(f"starting the memory service on {service.url} (state {state_dir})")
    service.start()
    ready_s = service.wait_ready(args.ready_timeout_s)
    _progress(f"service ready after {ready_s:.1f} s")
    return responder, service, service_env


def _filter_for(args: argparse.Namespace, url: str, api_key: str) -> Any:
    """The filter file loaded as Open WebUI loads it, its valves pointing at the service."""
    instance = load_filter_instance(args.filter_path)
    unknown = set_valves(
        instance,
        {
            "service_url": url,
            "api_key": api_key,
            "inlet_timeout_s": 5,
            "outlet_timeout_s": 10,
        },
    )
    if unknown:
        _progress(f"warning: the filter's Valves lack {', '.join(unknown)}")
    return instance


def _output_stem(args: argparse.Namespace) -> str:
    """The results' file name without suffix: conversation, then each non-default option."""
    stem = f"replay_locomo_conv{args.conversation}"
    if args.extraction == "per-turn" and not args.service_url:
        stem += "_per_turn"
    if args.chat_summary_tokens is not None and not args.service_url:
        stem += f"_summary{args.chat_summary_tokens}"
    if args.restart_after_turns is not None:
        stem += f"_restart{args.restart_after_turns}"
    return stem


def _problems(results: dict[str, Any]) -> list[str]:
    """What makes the replay fail: an undrained queue, lost turns, duplicate memories."""
    problems = []
    if not results["extraction"]["drained"]:
        problems.append("extraction did not drain before the deadline")
    if results["lost_turns"]:
        problems.append(f"{results['lost_turns']} accepted turns were not extracted")
    if results["duplicate_memories"]:
        problems.append(f"{results['duplicate_memories']} memories are stored twice")
    return problems


async def _run(
    sample: dict[str, Any],
    instance: Any,
    url: str,
    api_key: str,
    observer: TurnObserver,
    service: ServiceProcess | None,
    args: argparse.Namespace,
) -> dict[str, Any]:
    client = ServiceClient(url, api_key)
    try:
        replay = Replay(
            sample=sample,
            harness=FilterHarness(instance),
            client=client,
            observer=observer,
            service=service,
            restart_after_turns=args.restart_after_turns,
            ready_timeout_s=args.ready_timeout_s,
            drain_timeout_s=args.drain_timeout_s,
            save_context=args.save_context,
        )
        return await replay.run()
    finally:
        await client.aclose()


def _stop_service(service: ServiceProcess) -> None:
    """SIGTERM the service (SIGKILL after 60 s), then stop a PostgreSQL it left running."""
    code = service.terminate()
    leftover = service.stop_leftover_postgres()
    # uvicorn re-raises SIGTERM after its graceful shutdown, so -15 is the normal outcome.
    _progress(
        f"service stopped (exit code {code})"
        + (f"; stopped leftover PostgreSQL pid {leftover}" if leftover else "")
    )


if __name__ == "__main__":
    sys.exit(main())
