r"""An LLM tier on the read path, measured per question with and without it (issue 28 item 3).

    python -m bench.rerank_llm --llm-url http://127.0.0.1:18400/v1 \
        --llm-model qwen2.5-coder-1.5b-instruct --n prefeval_explicit_20=40,locomo_turns=40

Two levers, each against the read path as it is (`ours`), paired by question:

- `judge`: the service's own optional tier, `MEMORY_LLM_RELEVANCE` (`service/flows/relevance.py`,
  prompt `service.llm.relevance.PROMPT`): the LLM scores the gated items of the 0.7–0.93
  band and those under 0.5 are dropped. It acts on the inlet's block only (the ungated
  ranking is unchanged), so only the block metrics can move.
- `listwise`: one call per question over the `LISTWISE_K` best of the ungated ranking; the
  model answers the numbers of the notes that help, best first (`LISTWISE_PROMPT`, a JSON
  schema). Those go first, the others keep their order. A malformed answer (not the
  schema, a number out of range, a copied placeholder) keeps the original order. In the
  block the same answer lifts the same memories above the other gated items.

The sets are `bench.retrieval_sets`' on their held-out parts only: LoCoMo conversations 5–9
(turns, facts), PrefEval explicit with 20 users, users 10–19 (users 0–9 tuned the reserve,
docs/discussions/retrieval.md), and the multilingual set (nothing was tuned on it). Each is
subsampled to `n` questions with `random.Random(SEED)`: a CPU model answers in seconds, not
milliseconds. Differences are paired bootstrap 95 % intervals (`bench.locomo_retrieval.
bootstrap_difference`); with 20–80 questions they are wide.

Every LLM call is timed with the load average beside it; p50 / p95 are compared with the
inlet's deadline (`MEMORY_CONTEXT_DEADLINE_S`, 0.5 s by default). The bench lifts the
deadline for its own calls (quality is measured, not latency): in production a call past
0.5 s turns the whole block into the cached profile.

Without `--llm-url` a stand-in (`StandIn`: word overlap, in-process) answers both prompts, so
the harness runs anywhere in a few minutes; its figures prove the harness, not a model.

Results: `bench/results/rerank_llm.json` and `.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import retrieval_sets as rs
from bench.locomo import REPO_ROOT
from bench.locomo_retrieval import Pool, bootstrap_difference

__all__ = [
    "LISTWISE_K",
    "LISTWISE_PROMPT",
    "JudgeRanker",
    "ListwiseRanker",
    "StandIn",
    "main",
    "parse_listwise",
]

OUT = REPO_ROOT / "bench" / "results" / "rerank_llm"
SEED = 0
#: Candidates the listwise call sees: a 1.5B model on one CPU thread reads 7–12 prompt tokens
#: a second (shared/notes/local-llm.md), so each note costs seconds.
LISTWISE_K = 5
#: The inlet's own deadline (service/config.py, MEMORY_CONTEXT_DEADLINE_S default).
INLET_DEADLINE_S = 0.5
#: Seconds one call may take in the bench (a loaded 2-core machine; the model is slow).
CALL_TIMEOUT_S = 900.0
#: Questions per set when `--n` does not say.
DEFAULT_N = {"prefeval_explicit_20": 40, "locomo_turns": 40}

LISTWISE_PROMPT = """You choose which remembered notes help answer the user's message.
The notes are numbered. Answer one JSON object with the key "relevant": the numbers of the
notes that help, most helpful first, or an empty list when none helps. Nothing else."""

LISTWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "relevant": {"type": "array", "items": {"type": "integer"}, "maxItems": LISTWISE_K}
    },
    "required": ["relevant"],
}


# -- the listwise answer -----------------------------------------------------------------------


def parse_listwise(answer: str, k: int) -> list[int] | None:
    """The 0-based note positions the model chose, best first; None when the answer is unusable.

    Accepted: a JSON object whose "relevant" is a list of integers 1…`k` (numbers written as
    strings like "2" or "n2" count; duplicates after the first are ignored). Anything else —
    prose, another key, a number out of range, a float, a nested value — is None, and the
    caller keeps the original order.

    Args:
        answer: the model's text.
        k: how many notes were numbered.
    """
    from service.errors import ExtractionOutputInvalid
    from service.llm.client import decode_json_answer

    try:
        data = decode_json_answer(answer, max_chars=2_000)
    except ExtractionOutputInvalid:
        return None
    chosen = data.get("relevant") if isinstance(data, dict) else None
    if not isinstance(chosen, list):
        return None
    out: list[int] = []
    for item in chosen:
        number = _note_number(item)
        if number is None or not 1 <= number <= k:
            return None
        if number - 1 not in out:
            out.append(number - 1)
    return out


def _note_number(item: Any) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, str):
        found = re.fullmatch(r"\s*(?:n|#|note\s*)?(\d{1,3})\s*", item, re.IGNORECASE)
        return int(found.group(1)) if found else None
    return None


def listwise_messages(query: str, notes: Sequence[str]) -> list[dict[str, str]]:
    """The listwise call's messages: the prompt, then the message and the numbered notes."""
    listed = "\n".join(f"{i + 1}. {' '.join(text.split())}" for i, text in enumerate(notes))
    return [
        {"role": "system", "content": LISTWISE_PROMPT},
        {"role": "user", "content": f"Message: {query}\n\nNotes:\n{listed}"},
    ]


# -- an instrumented LLM client ----------------------------------------------------------------


@dataclasses.dataclass
class Call:
    """One LLM call of the bench."""

    kind: str  #: "judge" or "listwise"
    set: str
    question: str  #: the question's key
    seconds: float
    load: tuple[float, float, float]  #: os.getloadavg() at the end of the call
    usage: dict[str, Any]
    answer: str
    valid: bool | None = None  #: listwise: the answer was usable; judge: None


class Recorder:
    """Where each call lands, with the question being measured."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.set, self.question = "", ""


def recording_client(base_url: str, model: str, recorder: Recorder) -> Any:
    """An `LLMClient` to `base_url` that appends a `Call` for every completion."""
    from service.llm.client import LLMClient

    class Timed(LLMClient):
        async def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> str:
            started = time.perf_counter()
            answer = await super().complete(messages, **kwargs)
            kind = "listwise" if messages[0]["content"] == LISTWISE_PROMPT else "judge"
            recorder.calls.append(
                Call(
                    kind,
                    recorder.set,
                    recorder.question,
                    round(time.perf_counter() - started, 3),
                    os.getloadavg(),
                    self.last_usage,
                    answer[:2_000],
                )
            )
            return answer

        async def _post(self, body: dict[str, Any]) -> httpx.Response:
            response = await super()._post(body)
            try:
                self.last_usage = dict(response.json().get("usage") or {})
            except ValueError:
                self.last_usage = {}
            return response

    client = Timed(base_url=base_url, model=model, api_key=None, timeout_s=CALL_TIMEOUT_S)
    client.last_usage = {}
    return client


# -- the rankers -------------------------------------------------------------------------------


class JudgeRanker(rs.ServiceRanker):
    """The read path with `MEMORY_LLM_RELEVANCE` on for the block (the ranking is ungated)."""

    async def block(
        self,
        dataset: rs.RetrievalSet,
        pool: Pool,
        question: rs.Question,
        budget: int,
        ranked: Sequence[int],
    ) -> list[int]:
        """The inlet's block with the judge on (its scores are cached across budgets)."""
        self.rt.settings.llm_relevance = True
        try:
            return await super().block(dataset, pool, question, budget, ranked)
        finally:
            self.rt.settings.llm_relevance = False


class ListwiseRanker(rs.ServiceRanker):
    """The read path, its best `k` reordered by one listwise LLM call per question."""

    def __init__(self, rt: Any, recorder: Recorder, k: int = LISTWISE_K) -> None:
        super().__init__(rt, name="listwise")
        self.recorder, self.k = recorder, k
        self._chosen: dict[str, list[Any]] = {}  # question key → memory ids lifted, best first

    async def rank(self, dataset: rs.RetrievalSet, pool: Pool, question: rs.Question) -> list[int]:
        """Ours' ranking with the model's choice among its first `k` moved to the front."""
        ranked = await super().rank(dataset, pool, question)
        head = ranked[: self.k]
        picked = await self._ask(question, [pool.texts[i] for i in head])
        lifted = [head[p] for p in picked or []]
        ids = {index: memory_id for memory_id, index in pool.by_memory_id.items()}
        self._chosen[question.key] = [ids[i] for i in lifted]
        return lifted + [i for i in ranked if i not in lifted]

    async def _ask(self, question: rs.Question, notes: Sequence[str]) -> list[int] | None:
        """The model's choice among `notes` (0-based, best first); None: keep the order.

        A failed call (timeout, HTTP error) is recorded as an invalid answer: the order stays.
        """
        from service.errors import LLMUnavailable

        started = time.perf_counter()
        try:
            answer = await self.rt.llm.complete(
                listwise_messages(question.text, notes),
                json_answer=True,
                max_tokens=40,
                schema=LISTWISE_SCHEMA,
            )
        except LLMUnavailable as exc:
            seconds = round(time.perf_counter() - started, 3)
            self.recorder.calls.append(
                Call(
                    "listwise",
                    self.recorder.set,
                    question.key,
                    seconds,
                    os.getloadavg(),
                    {},
                    f"error: {exc}",
                    valid=False,
                )
            )
            return None
        picked = parse_listwise(answer, len(notes))
        self.recorder.calls[-1].valid = picked is not None
        return picked

    async def block(
        self,
        dataset: rs.RetrievalSet,
        pool: Pool,
        question: rs.Question,
        budget: int,
        ranked: Sequence[int],
    ) -> list[int]:
        """The inlet's block with the lifted memories first among the gated items."""
        with _lifting(self._chosen.get(question.key, [])):
            return await super().block(dataset, pool, question, budget, ranked)


@contextlib.contextmanager
def _lifting(memory_ids: Sequence[Any]) -> Iterator[None]:
    """Within the block: the LLM tier's hook lifts `memory_ids` above every other item.

    The hook (`service.flows.relevance.apply_llm_tier`, called by `retrieve` after the gate)
    is replaced for the duration; a lifted memory that did not pass the gate stays out.
    """
    from service.flows import relevance

    original = relevance.apply_llm_tier
    place = {memory_id: n for n, memory_id in enumerate(memory_ids)}

    async def lift(rt: Any, *, query: str, items: list[Any], params: Any) -> list[Any]:
        items = await original(rt, query=query, items=items, params=params)
        return [
            dataclasses.replace(f, relevance=2.0 - place[f.candidate.memory.id] / 100)
            if f.candidate.memory.id in place
            else f
            for f in items
        ]

    relevance.apply_llm_tier = lift
    try:
        yield
    finally:
        relevance.apply_llm_tier = original


# -- the stand-in ------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z]{4,}")


class StandIn:
    """Answers both prompts by word overlap (words of 4+ letters), for runs without a model."""

    def __call__(self, request: dict[str, Any]) -> str:
        """The answer text for one chat-completion request body."""
        messages = request.get("messages") or []
        system, user = str(messages[0].get("content")), str(messages[-1].get("content"))
        query, _, notes = user.partition("\n\nNotes:\n")
        words = set(_WORD.findall(query.lower()))
        if system == LISTWISE_PROMPT:
            lines = notes.splitlines()
            hits = [i + 1 for i, line in enumerate(lines) if words & set(_WORD.findall(line))]
            return json.dumps({"relevant": hits})
        scores = {}
        for line in notes.splitlines():
            found = re.match(r"\[(n\d+)\]\s*(.*)", line)
            if found:
                overlap = words & set(_WORD.findall(found.group(2).lower()))
                scores[found.group(1)] = 0.9 if overlap else 0.1
        return json.dumps(scores)


# -- running -----------------------------------------------------------------------------------


def held_out(dataset: rs.RetrievalSet, n: int, seed: int = SEED) -> rs.RetrievalSet:
    """`n` questions of `dataset`'s held-out part, drawn with `random.Random(seed)`, set order.

    LoCoMo's sets are already conversations 5–9; of PrefEval's 20 users only users 10–19
    (their pool index); the multilingual set is held out whole.
    """
    questions = dataset.questions
    if dataset.name.startswith("prefeval_explicit_20"):
        questions = [q for q in questions if q.pool >= rs.PREFEVAL_USERS // 2]
    picked = sorted(random.Random(seed).sample(range(len(questions)), min(n, len(questions))))
    return dataclasses.replace(dataset, questions=[questions[i] for i in picked])


class _Progress(rs.Ranker):
    """Wraps a ranker: tells the recorder which question is asked, prints progress."""

    def __init__(self, inner: rs.Ranker, recorder: Recorder) -> None:
        self.inner, self.recorder, self.name = inner, recorder, inner.name
        self.done = 0

    async def rank(self, dataset: rs.RetrievalSet, pool: Pool, question: rs.Question) -> list[int]:
        self.recorder.set, self.recorder.question = dataset.name, question.key
        self.done += 1
        calls = len(self.recorder.calls)
        rs._progress(f"{dataset.name} {self.name} {self.done}/{len(dataset.questions)} ({calls})")
        return await self.inner.rank(dataset, pool, question)

    async def block(
        self,
        dataset: rs.RetrievalSet,
        pool: Pool,
        question: rs.Question,
        budget: int,
        ranked: Sequence[int],
    ) -> list[int]:
        return await self.inner.block(dataset, pool, question, budget, ranked)


@contextlib.asynccontextmanager
async def _llm_endpoint(url: str | None) -> AsyncIterator[str]:
    """`url`, or a stand-in server's URL for the duration."""
    if url:
        yield url
        return
    from testkit.llm_stub import LLMStub

    with LLMStub(responder=StandIn()) as stub:
        yield stub.base_url


async def measure(
    sets: Mapping[str, rs.RetrievalSet],
    *,
    encoder: Any,
    url: str,
    model: str,
    levers: Sequence[str],
    on_set: Callable[[dict[str, Any]], None] = lambda _doc: None,
) -> dict[str, Any]:
    """Ours, then each lever, over each (already subsampled) set; the per-question values.

    `on_set` gets the document so far after each set (a long run keeps what it measured).
    """
    recorder = Recorder()
    out: dict[str, Any] = {"sets": {}}
    async with rs.service(encoder) as rt:
        rt.llm = recording_client(url, model, recorder)
        # quality is measured: the model's seconds must not turn a block into the fallback
        rt.settings.context_deadline_s = CALL_TIMEOUT_S
        rankers: dict[str, rs.Ranker] = {"ours": rs.ServiceRanker(rt)}
        if "judge" in levers:
            rankers["judge"] = JudgeRanker(rt, name="judge")
        if "listwise" in levers:
            rankers["listwise"] = ListwiseRanker(rt, recorder)
        for name, dataset in sets.items():
            await rankers["ours"].add(dataset)  # type: ignore[attr-defined]
            evaluations = {
                key: await rs.evaluate(_Progress(ranker, recorder), dataset)
                for key, ranker in rankers.items()
            }
            out["sets"][name] = _set_result(dataset, evaluations)
            out["calls"] = [dataclasses.asdict(c) for c in recorder.calls]
            out["latency"] = latency_summary(recorder.calls)
            on_set(out)
    return out


def _set_result(dataset: rs.RetrievalSet, evaluations: Mapping[str, rs.Evaluation]) -> Any:
    ours = evaluations["ours"]
    return {
        "description": dataset.description,
        "questions": len(dataset.questions),
        "question_keys": [q.key for q in dataset.questions],
        "means": {k: e.means for k, e in evaluations.items()},
        "seconds": {k: round(e.seconds, 1) for k, e in evaluations.items()},
        "lever_minus_ours": {
            key: {
                m: {**bootstrap_difference(e.per_question[m], ours.per_question[m])}
                for m in ours.per_question
            }
            for key, e in evaluations.items()
            if key != "ours"
        },
        "per_question": {k: e.per_question for k, e in evaluations.items()},
    }


def latency_summary(calls: Sequence[Call]) -> dict[str, Any]:
    """Per call kind: n, p50 / p95 / max seconds, prompt and answer tokens, load averages."""
    out: dict[str, Any] = {}
    for kind in sorted({c.kind for c in calls}):
        mine = [c for c in calls if c.kind == kind]
        seconds = np.asarray([c.seconds for c in mine])
        loads = np.asarray([c.load[0] for c in mine])
        prompt = [int(c.usage.get("prompt_tokens", 0)) for c in mine]
        answer = [int(c.usage.get("completion_tokens", 0)) for c in mine]
        out[kind] = {
            "n": len(mine),
            "p50_s": round(float(np.percentile(seconds, 50)), 2),
            "p95_s": round(float(np.percentile(seconds, 95)), 2),
            "max_s": round(float(seconds.max()), 2),
            "over_inlet_deadline": int((seconds > INLET_DEADLINE_S).sum()),
            "prompt_tokens_median": float(np.median(prompt)),
            "answer_tokens_median": float(np.median(answer)),
            "load1_median": round(float(np.median(loads)), 2),
            "load1_range": [round(float(loads.min()), 2), round(float(loads.max()), 2)],
            "valid_answers": sum(1 for c in mine if c.valid) if kind == "listwise" else None,
            "order_changed": sum(1 for c in mine if _reorders(c)) if kind == "listwise" else None,
        }
    return out


def _reorders(call: Call) -> bool:
    """True when a listwise answer moves a note (not the first m notes in their order)."""
    picked = parse_listwise(call.answer, LISTWISE_K) if call.valid else None
    return bool(picked) and picked != list(range(len(picked or [])))


_LABELS = {"recall@1": "R@1", "recall@10": "R@10", "mrr": "MRR"}


def render_markdown(doc: Mapping[str, Any]) -> str:
    """Tables: per set the means of ours and each lever, the paired difference; then latency."""
    lines = [
        "# An LLM tier on the read path (issue 28 item 3)",
        "",
        f"Model: {doc['model']} at {doc['endpoint']}; finished {doc['finished']}; "
        f"{doc['run_seconds']:.0f} s. Held-out questions only, subsampled with seed {SEED}. "
        "Differences: lever − ours in points, paired bootstrap 95 % interval (2,000 "
        "resamples); with these n the intervals are wide.",
        "",
    ]
    for name, result in doc["sets"].items():
        metrics = list(result["means"]["ours"])
        heads = [_LABELS.get(m, m.replace("block@", "block ")) for m in metrics]
        lines += [
            f"## {name} (n = {result['questions']})",
            "",
            "| | " + " | ".join(heads) + " |",
            "|---|" + "---:|" * len(metrics),
        ]
        for key, means in result["means"].items():
            lines.append(f"| {key} | " + " | ".join(f"{means[m]:.1f}" for m in metrics) + " |")
        for key, diffs in result["lever_minus_ours"].items():
            cells = [
                f"{d['diff']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}]" for d in diffs.values()
            ]
            lines.append(f"| {key} − ours | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## Latency of one call",
        "",
        "| kind | n | p50 s | p95 s | max s | over 0.5 s | prompt tok | answer tok | "
        "load (1 min) median [range] | valid | reordered |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for kind, s in doc["latency"].items():
        valid = "" if s["valid_answers"] is None else str(s["valid_answers"])
        moved = "" if s.get("order_changed") is None else str(s["order_changed"])
        lines.append(
            f"| {kind} | {s['n']} | {s['p50_s']} | {s['p95_s']} | {s['max_s']} | "
            f"{s['over_inlet_deadline']} | {s['prompt_tokens_median']:.0f} | "
            f"{s['answer_tokens_median']:.0f} | {s['load1_median']} {s['load1_range']} | {valid} | "
            f"{moved} |"
        )
    return "\n".join(lines) + "\n"


def merge(paths: Sequence[Path]) -> dict[str, Any]:
    """One document of several runs (each a `<out>.json` of this script), in the given order."""
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    for run in runs:  # figures added since a run was written are computed from its calls
        run["latency"] = latency_summary([Call(**c) for c in run["calls"]])
    return {"runs": runs}


def render_runs(doc: Mapping[str, Any]) -> str:
    """The markdown of a merged document: each run's tables under its own heading."""
    lines = [
        "# An LLM tier on the read path (issue 28 item 3)",
        "",
        "Several runs of `python -m bench.rerank_llm` against one llama.cpp server, one after "
        "another (one model, one thread); each run's levers and n are its own.",
        "",
    ]
    for number, run in enumerate(doc["runs"], 1):
        body = render_markdown(run).split("\n", 2)[2]  # without the title
        body = body.replace("\n## ", "\n### ")
        levers = ", ".join(run["levers"])
        lines += [f"## Run {number}: {levers}", "", body.strip(), ""]
    return "\n".join(lines)


def _counts(text: str) -> dict[str, int]:
    out = {}
    for part in filter(None, text.split(",")):
        name, _, n = part.partition("=")
        out[name.strip()] = int(n)
    return out


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.rerank_llm", description=__doc__.split("\n\n")[1]
    )
    shared = REPO_ROOT.parent / "shared" / "data"
    parser.add_argument("--locomo", type=Path, default=shared / "locomo" / "locomo10.json")
    parser.add_argument("--prefeval", type=Path, default=shared / "prefeval")
    parser.add_argument("--llm-url", default=None, help="OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--llm-model", default="stand-in")
    parser.add_argument(
        "--n",
        type=_counts,
        default=DEFAULT_N,
        help="questions per set, e.g. prefeval_explicit_20=40,locomo_turns=40,multilingual=30",
    )
    parser.add_argument("--levers", type=lambda s: s.split(","), default=["judge", "listwise"])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        help="write <out>.json/.md from these run documents instead of measuring",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurement; write `<out>.json` and `<out>.md`."""
    args = _parse_args(argv)
    if args.merge:
        doc = merge(args.merge)
        args.out.with_suffix(".json").write_text(json.dumps(doc) + "\n", encoding="utf-8")
        args.out.with_suffix(".md").write_text(render_runs(doc), encoding="utf-8")
        return 0
    started = time.perf_counter()
    sets = rs.load_sets(
        locomo=args.locomo if any(n.startswith("locomo") for n in args.n) else None,
        prefeval=args.prefeval if any(n.startswith("prefeval") for n in args.n) else None,
    )
    sets = {name: held_out(sets[name], n) for name, n in args.n.items()}
    encoder = rs.embed_sets(sets)

    head = {
        "model": args.llm_model,
        "endpoint": args.llm_url or "stand-in (word overlap)",
        "levers": args.levers,
        "listwise_k": LISTWISE_K,
        "seed": SEED,
        "requested_n": args.n,
    }

    def write(measured: dict[str, Any]) -> None:
        doc = {
            **head,
            **measured,
            "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "run_seconds": round(time.perf_counter() - started, 1),
            "load_at_end": os.getloadavg(),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(doc) + "\n", encoding="utf-8")
        args.out.with_suffix(".md").write_text(render_markdown(doc), encoding="utf-8")

    async def run() -> dict[str, Any]:
        async with _llm_endpoint(args.llm_url) as url:
            return await measure(
                sets,
                encoder=encoder,
                url=url,
                model=args.llm_model,
                levers=args.levers,
                on_set=write,
            )

    asyncio.run(run())
    print(args.out.with_suffix(".md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
