"""Does the summarizer shrink memory without losing recall? A before/after measurement.

    python -m bench.summarizer_replay                     # LoCoMo conversation 0
    python -m bench.summarizer_replay --conversation 3 --keep-state

1. Replays one LoCoMo conversation through the filter and a freshly started service exactly
   as `bench/replay_locomo.py` does (its `Replay`: each speaker is the user, each session a
   saved chat; the LLM stand-in answers every extraction with that turn's LoCoMo
   `observation` facts), then asks every category 1–4 question through the inlet: *before*.
2. Runs the summarizer as an operator would, `python -m service summarize --all`, in its own
   process against the same database, with the age gate at 0 days so every memory
   qualifies. The stand-in answers each summary request with the sources' texts joined
   (`testkit/summary_replies.py`, dated when the sources are): a merge that loses
   nothing by construction, so the measurement is of the machinery — clustering, archiving,
   retrieval and the token budget over summaries — not of an LLM's prose.
3. Asks the same questions again: *after*. Then runs the summarizer once more, which must
   find nothing to do.

A question is a hit when the injected text contains, verbatim, a fact derived from one of
its evidence turns (`bench.replay_locomo.score_question`); a summary that keeps the fact's
text keeps the hit. Tokens are the injected block's estimate (`service.core.tokens`). The
stand-in answers other requests (core profiles) with an empty text, so no profile is written
and the injected text is memories only.

Results: `bench/results/summarizer_replay[_conv<N>].{json,md}`. Exit code 1 when recall
drops by more than 2 points, the memory count does not fall, or the second run changes
anything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.chat_harness import MODEL_ID, FilterHarness, load_filter_instance, set_valves
from bench.locomo import (
    DEFAULT_DATA_PATH,
    REPO_ROOT,
    build_replay_plan,
    load_conversation,
    speakers,
)
from bench.replay_locomo import LocomoResponder, Replay, summarize_answers
from bench.service_process import ServiceClient, ServiceProcess, TurnObserver, free_port
from service.core.tokens import estimate_tokens
from testkit.llm_stub import LLMStub
from testkit.summary_replies import faithful_merge, is_summary_request

__all__ = ["main", "render_markdown"]

DEFAULT_OUT_DIR = REPO_ROOT / "bench" / "results"
MAX_RECALL_DROP_POINTS = 2.0
#: The summarizer's settings for the measurement: the defaults, with the age gate at 0 days.
SUMMARIZER_ENV = {"MEMORY_CONSOLIDATION_AGE_DAYS": "0"}


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class StandIn:
    """The LLM stand-in: LoCoMo facts for extraction, a faithful merge for summaries, and an
    empty answer for anything else.
    """

    def __init__(self, extraction: LocomoResponder) -> None:
        self.extraction = extraction
        self.summaries = 0  #: summary requests answered

    def __call__(self, request: dict[str, Any]) -> str:
        if is_summary_request(request):
            self.summaries += 1
            return faithful_merge(request)
        answer = self.extraction(request)
        return "" if answer == "Okay." else answer


def _environment(state_dir: Path, llm_base_url: str, extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMORY_", "LLM_")) and k != "DATABASE_URL"
    }
    env.update(
        {
            "MEMORY_STATE_DIR": str(state_dir),
            "LLM_BASE_URL": llm_base_url,
            "LLM_MODEL": MODEL_ID,
            "LLM_API_KEY": "x",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            **extra,
        }
    )
    return env


def run_summarizer(env: dict[str, str], *, timeout_s: float) -> dict[str, Any]:
    """`python -m service summarize --all` in its own process; its output and wall time."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "service", "summarize", "--all"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    wall_s = time.monotonic() - started
    for line in done.stdout.splitlines():
        _progress(f"  summarize: {line}")
    if done.returncode != 0:
        raise RuntimeError(f"summarize exited with {done.returncode}: {done.stderr[-2000:]}")
    return {"wall_s": round(wall_s, 2), "output": done.stdout.splitlines()}


def _snapshot(
    answers: Sequence[dict[str, Any]], counts: dict[str, int], *, keep_text: bool = False
) -> dict[str, Any]:
    tokens = [
        estimate_tokens(a["injected"] if keep_text else a.pop("injected", "")) for a in answers
    ]
    return {
        "active_memories": counts,
        "active_memories_total": sum(counts.values()),
        "tokens_per_question": {
            "mean": round(float(np.mean(tokens)), 1),
            "p50": float(np.percentile(tokens, 50)),
            "p95": float(np.percentile(tokens, 95)),
        },
        "qa": summarize_answers(answers),
    }


async def _counts(client: ServiceClient, users: dict[str, dict[str, Any]]) -> dict[str, int]:
    return {speaker: (await client.memories(user["id"]))[0] for speaker, user in users.items()}


async def _measure(
    replay: Replay, client: ServiceClient, env: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    replayed = await replay.run()
    before = _snapshot(
        replayed["questions"], await _counts(client, replay.users), keep_text=args.save_context
    )
    _progress(
        f"before: {before['active_memories_total']} active memories, hit share "
        f"{before['qa']['overall']['hit_share']}"
    )
    _progress("running the summarizer (python -m service summarize --all)")
    first = await asyncio.to_thread(run_summarizer, env, timeout_s=args.summarize_timeout_s)
    answers = await replay._ask_questions()
    after = _snapshot(answers, await _counts(client, replay.users), keep_text=args.save_context)
    _progress(
        f"after: {after['active_memories_total']} active memories, hit share "
        f"{after['qa']['overall']['hit_share']}"
    )
    second = await asyncio.to_thread(run_summarizer, env, timeout_s=args.summarize_timeout_s)
    again = await _counts(client, replay.users)
    return {
        "turns_replayed": replayed["turns_replayed"],
        "lost_turns": replayed["lost_turns"],
        "before": before,
        "after": after,
        "summarizer": {
            "first_run": first,
            "second_run": second,
            "second_run_changed_count": again != after["active_memories"],
        },
        "per_question": [
            {
                "index": b["index"],
                "category": b["category"],
                "speaker": b["speaker"],
                "hit_before": b["hit"],
                "hit_after": a["hit"],
                **(
                    {"injected_before": b["injected"], "injected_after": a["injected"]}
                    if args.save_context
                    else {}
                ),
            }
            for b, a in zip(replayed["questions"], answers, strict=True)
        ],
    }


def _points(share: float | None) -> float:
    return 100.0 * (share or 0.0)


def render_markdown(results: dict[str, Any]) -> str:
    """The before/after table and the run's figures as Markdown."""
    before, after = results["before"], results["after"]
    lines = [
        f"# Summarizer replay: {results['conversation_id']} (conversation "
        f"{results['conversation']})",
        "",
        f"Started {results['started_at']}; summarizer settings: defaults with "
        f"{', '.join(f'{k}={v}' for k, v in results['summarizer_env'].items())}.",
        "",
        "| | before | after | change |",
        "|---|---:|---:|---:|",
    ]
    total_b, total_a = before["active_memories_total"], after["active_memories_total"]
    lines.append(
        f"| active memories | {total_b} | {total_a} | "
        f"{total_a - total_b:+d} ({(total_a - total_b) / total_b:+.0%}) |"
    )
    for speaker, count in before["active_memories"].items():
        now = after["active_memories"][speaker]
        lines.append(f"| – {speaker} | {count} | {now} | {now - count:+d} |")
    tb, ta = before["tokens_per_question"], after["tokens_per_question"]
    lines.append(
        f"| tokens injected per question (mean) | {tb['mean']:.1f} | {ta['mean']:.1f} "
        f"| {ta['mean'] - tb['mean']:+.1f} |"
    )
    lines.append(
        f"| tokens injected per question (p50 / p95) | {tb['p50']:.0f} / "
        f"{tb['p95']:.0f} | {ta['p50']:.0f} / {ta['p95']:.0f} | |"
    )
    ob, oa = before["qa"]["overall"], after["qa"]["overall"]
    lines.append(
        f"| evidence-hit rate, all {ob['n']} questions | {_points(ob['hit_share']):.1f} % "
        f"| {_points(oa['hit_share']):.1f} % | "
        f"{_points(oa['hit_share']) - _points(ob['hit_share']):+.1f} pt |"
    )
    for key, row in before["qa"]["by_category"].items():
        now = after["qa"]["by_category"][key]
        lines.append(
            f"| – {key} {row['name']} ({row['n']}) | {_points(row['hit_share']):.1f} % | "
            f"{_points(now['hit_share']):.1f} % | "
            f"{_points(now['hit_share']) - _points(row['hit_share']):+.1f} pt |"
        )
    flips = results["per_question"]
    gained = sum(q["hit_after"] and not q["hit_before"] for q in flips)
    lost = sum(q["hit_before"] and not q["hit_after"] for q in flips)
    summarizer = results["summarizer"]
    lines += [
        "",
        "| figure | value |",
        "|---|---|",
        f"| questions that became hits / misses | {gained} / {lost} |",
        f"| summarizer run (`summarize --all`) | {summarizer['first_run']['wall_s']:.1f} s, "
        f"{summarizer['summary_requests']} summary requests |",
        f"| summarizer output | {'; '.join(summarizer['first_run']['output'][-1:])} |",
        f"| second run | {'; '.join(summarizer['second_run']['output'][-1:])} |",
        f"| turns replayed / lost | {results['turns_replayed']} / {results['lost_turns']} |",
    ]
    return "\n".join(lines) + "\n"


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.summarizer_replay", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_PATH)
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument("--ready-timeout-s", type=float, default=300.0)
    parser.add_argument("--drain-timeout-s", type=float, default=1800.0)
    parser.add_argument("--summarize-timeout-s", type=float, default=1800.0)
    parser.add_argument(
        "--keep-state", action="store_true", help="keep the service's temporary state directory"
    )
    parser.add_argument(
        "--save-context",
        action="store_true",
        help="keep each question's injected text, before and after, in the JSON",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another summarizer setting, e.g. MEMORY_CONSOLIDATION_COSINE=0.7",
    )
    args = parser.parse_args(argv)
    try:
        args.summarizer_env = {**SUMMARIZER_ENV, **dict(item.split("=", 1) for item in args.set)}
    except ValueError:
        parser.error("--set takes NAME=VALUE")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurement; returns the process exit code."""
    args = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sample = load_conversation(args.data, args.conversation)
    started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    observer = TurnObserver()
    with contextlib.ExitStack() as stack:
        stand_in = StandIn(
            LocomoResponder(build_replay_plan(sample, speaker) for speaker in speakers(sample))
        )
        stub = LLMStub(stand_in).start()
        stack.callback(stub.stop)
        state_dir = Path(tempfile.mkdtemp(prefix="summarizer-replay-"))
        if args.keep_state:
            _progress(f"state directory kept at {state_dir}")
        else:
            stack.callback(shutil.rmtree, state_dir, ignore_errors=True)
        api_key = secrets.token_urlsafe(24)
        # a session's turns come back to back: its chat is quiet after 10 s (as in the replay)
        service = ServiceProcess(
            state_dir=state_dir,
            port=free_port(),
            api_key=api_key,
            llm_base_url=stub.base_url,
            llm_model=MODEL_ID,
            log_path=state_dir / "service.log",
            env={"MEMORY_BATCH_QUIET_S": "10"},
        )
        stack.callback(_stop, service)
        _progress(f"starting the memory service on {service.url} (state {state_dir})")
        service.start()
        service.wait_ready(args.ready_timeout_s)
        instance = load_filter_instance()
        set_valves(
            instance,
            {
                "service_url": service.url,
                "api_key": api_key,
                "inlet_timeout_s": 5,
                "outlet_timeout_s": 10,
            },
        )
        observer.install()
        stack.callback(observer.uninstall)
        env = _environment(state_dir, stub.base_url, args.summarizer_env)

        async def run() -> dict[str, Any]:
            client = ServiceClient(service.url, api_key)
            try:
                replay = Replay(
                    sample=sample,
                    harness=FilterHarness(instance),
                    client=client,
                    observer=observer,
                    service=service,
                    restart_after_turns=None,
                    ready_timeout_s=args.ready_timeout_s,
                    drain_timeout_s=args.drain_timeout_s,
                    save_context=True,
                )
                return await _measure(replay, client, env, args)
            finally:
                await client.aclose()

        measured = asyncio.run(run())
        measured["summarizer"]["summary_requests"] = stand_in.summaries
    data = os.path.relpath(args.data.resolve(), REPO_ROOT)
    results = {
        "benchmark": "summarizer-replay",
        "conversation": args.conversation,
        "conversation_id": str(sample.get("sample_id", "")),
        "data": data,
        "started_at": started_at,
        "summarizer_env": args.summarizer_env,
        **measured,
    }
    markdown = render_markdown(results)
    stem = "summarizer_replay" + (f"_conv{args.conversation}" if args.conversation else "")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(
        json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (args.out / f"{stem}.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    _progress(f"wrote {args.out / stem}.json and .md")
    return 1 if _problems(results) else 0


def _problems(results: dict[str, Any]) -> list[str]:
    before, after = results["before"], results["after"]
    drop = _points(before["qa"]["overall"]["hit_share"]) - _points(
        after["qa"]["overall"]["hit_share"]
    )
    problems = []
    if drop > MAX_RECALL_DROP_POINTS:
        problems.append(
            f"recall dropped by {drop:.1f} points (at most {MAX_RECALL_DROP_POINTS:g} allowed)"
        )
    if after["active_memories_total"] >= before["active_memories_total"]:
        problems.append("the active memory count did not fall")
    if results["summarizer"]["second_run_changed_count"]:
        problems.append("the second summarizer run changed the memories")
    for problem in problems:
        _progress(f"FAIL: {problem}")
    return problems


def _stop(service: ServiceProcess) -> None:
    service.terminate()
    service.stop_leftover_postgres()


if __name__ == "__main__":
    sys.exit(main())
