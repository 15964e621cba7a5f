"""Summarize the figures `make reliability` wrote into one Markdown page.

    python -m bench.reliability_summary bench/results/reliability

Reads the JSON files the reliability tests and `bench.load_test` left in the folder and writes
`summary.md` next to them (also printed): faults survived, load held, bad inputs tried and
the lost or leaked memories. A missing file is reported as "not run".
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _read(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def summarize(folder: Path) -> str:
    """The Markdown summary of the figures in `folder`."""
    lines = ["# Reliability figures", ""]
    fail_open = _read(folder, "fail_open")
    lines += ["## Faults survived", ""]
    if fail_open:
        lines += [
            f"Filter valves: inlet {fail_open['inlet_timeout_s']} s, outlet "
            f"{fail_open['outlet_timeout_s']} s. Each row: the chat was answered, without "
            "memory, with a status line. Loop lag: how long the test's event loop was kept "
            "from running during the call (machine load), not held against the valve.",
            "",
            "| fault | inlet returned after (s) | inlet loop lag (s) "
            "| outlet returned after (s) | outlet loop lag (s) |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {fault} | {f['inlet_s']} | {f.get('inlet_loop_lag_s', '')} "
            f"| {f['outlet_s']} | {f.get('outlet_loop_lag_s', '')} |"
            for fault, f in fail_open["faults"].items()
        ]
        lines.append("")
    else:
        lines += ["fail-open run: not run", ""]
    sentence: Callable[[dict[str, Any]], str]
    for name, sentence in (
        (
            "llm_outage",
            lambda f: (
                f"LLM outage: {f['attempts']} attempts, waits "
                f"{f['waits_s']} s, then parked as failed and listed."
            ),
        ),
        (
            "long_outage",
            lambda f: (
                f"Long LLM outage: {f['outage_s']} s down, {f['turns_arrived']} turns "
                f"arrived, {f['failed_llm_calls_during_outage']} failed LLM calls, "
                f"{f['turns_failed']} parked; the backlog drained by itself "
                f"{f['backlog_drained_s']} s after the LLM was back."
            ),
        ),
        (
            "database_restart",
            lambda f: (
                f"Database restart under a running service: API ready "
                f"again after {f['ready_again_s']} s, every accepted "
                f"turn done after {f['all_turns_done_s']} s, "
                f"{f['turns_lost']} lost."
            ),
        ),
        (
            "kill_during_load",
            lambda f: (
                f"kill -9 during {f['outlet_calls']} outlet calls: "
                f"{f['accepted_before_kill']} accepted before the kill, "
                f"{f['facts_stored_once']} facts stored exactly once, "
                f"{f['lost']} lost, {f['duplicated']} duplicated."
            ),
        ),
        (
            "extraction_races",
            lambda f: (
                f"Races with an extraction held in its LLM call (seed {f['seed']}, "
                f"{f['interleavings']} interleavings: {f['interleavings_per_pair']}): "
                f"{f['resurrected']} resurrected memories, {f['double_successors']} double "
                f"successors, {f['stuck_turns']} stuck turns, "
                f"{f['writes_for_discarded_turns']} writes for discarded turns, "
                f"{f['lost_edits']} lost edits, {f['waited_for_the_llm']} operations that "
                f"waited for the LLM."
            ),
        ),
        (
            "embedding_model_change",
            lambda f: (
                f"Embedding model changed: {f['re_embedded']} memories re-embedded in the "
                f"background, requests meanwhile answered {f['requests_meanwhile_status']}."
            ),
        ),
    ):
        figures = _read(folder, name)
        lines.append(f"- {sentence(figures)}" if figures else f"- {name}: not run")
    lines.append("")

    load = _read(folder, "load")
    lines += ["## Load held", ""]
    if load:
        lines += [
            f"{load['users']} users for {load['duration_s']} s: {load['requests']} "
            f"requests ({load['throughput_rps']} per second), errors {load['errors']}, "
            f"cross-user leaks {load['leaks']} ({load['answers_with_own_memories']} "
            f"answers carried the user's own memories), facts lost {load['facts_lost']}, "
            f"duplicated {load['facts_duplicated']} of {load['facts_accepted']}.",
            "",
            "| kind | requests | p50 ms | p95 ms | p99 ms |",
            "|---|---|---|---|---|",
        ]
        for kind, n in load["latency_ms"].items():
            count = load["by_kind"].get(kind, load["requests"])
            lines.append(f"| {kind} | {count} | {n['p50']} | {n['p95']} | {n['p99']} |")
        lines.append("")
    else:
        lines += ["load run: not run", ""]

    fuzz = _read(folder, "api_fuzz")
    lines += ["## Bad inputs tried", ""]
    if fuzz:
        lines += [
            f"{fuzz['cases']} requests ({fuzz['generated']} generated from the OpenAPI "
            f"schema over {fuzz['operations']} operations, the rest hand-written); "
            f"answers by status {fuzz['by_status']}; server errors "
            f"{fuzz['server_errors']}.",
            "",
        ]
        lines += [
            f"- 5xx: {e['method']} {e['path']} sent {e['sent'][:120]}"
            for e in fuzz["server_error_examples"]
        ]
        lines.append("")
    else:
        lines += ["fuzz run: not run (pip install -e '.[reliability]')", ""]

    secrets = _read(folder, "poisoning_secrets")
    chat = _read(folder, "poisoning_chat")
    lines += ["## Poisoning and secrets", ""]
    guard_secrets = _read(folder, "guard_secrets")
    guard_orders = _read(folder, "guard_instructions")
    if guard_secrets:
        lines.append(
            f"- Secrets caught / look-alikes kept: {guard_secrets['secrets_caught']} of "
            f"{guard_secrets['secrets']} secret formats caught (none in the LLM requests or "
            f"any table), {guard_secrets['lookalikes_kept']} of {guard_secrets['lookalikes']} "
            "look-alikes stored unchanged (tests/corpora/secrets.json, by chat and /memory add)."
        )
    else:
        lines.append("- secrets corpus: not run")
    guard_v2 = _read(folder, "guard_secrets_v2_report")
    if guard_v2:
        lines.append(
            f"- Secrets corpus v2, report half: {guard_v2['secrets_caught']} of "
            f"{guard_v2['secrets']} secrets caught ({guard_v2['kinds']} kinds), "
            f"{guard_v2['lookalikes_kept']} of {guard_v2['lookalikes']} look-alikes stored "
            "unchanged (tests/corpora/secrets_v2.json, by chat and /memory add)."
        )
    if guard_orders:
        lines.append(
            f"- Instructions refused / preferences kept: {guard_orders['instructions_refused']} "
            f"of {guard_orders['planted']} planted instructions refused "
            f"({guard_orders['split_over_two_messages']} split over two messages), "
            f"{guard_orders['preferences_kept']} of {guard_orders['preferences']} genuine "
            "preferences stored (tests/corpora/instructions.json, by chat and /memory add)."
        )
    else:
        lines.append("- instructions corpus: not run")
    if chat:
        lines.append(
            f"- {chat['instruction_like_facts_proposed']} instruction-like facts "
            f"proposed by the LLM, {chat['stored']} stored."
        )
    if secrets:
        lines.append(
            f"- {secrets['secrets_in_messages']} credentials in a message: "
            f"{secrets['sent_to_llm']} sent to the LLM, {secrets['found_in_tables']} "
            f"found in {', '.join(secrets['tables_searched'])}, "
            f"{secrets['found_in_logs']} in the logs."
        )
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0] if args else "bench/results/reliability")
    text = summarize(folder)
    (folder / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
