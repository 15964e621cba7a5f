"""bench.noisy_neighbour's page puts the modes side by side: one column per run, one row per
phase and per crowd size (issue 26 item 1: both modes measured in one run)."""

from __future__ import annotations

from typing import Any

from bench import noisy_neighbour


def _run(mode: str, ratio: float) -> dict[str, Any]:
    phase = {
        "phase": "forget all", "n": 10, "p50_ms": 50.0, "p95_ms": 90.0, "ratio_p50": ratio,
        "ratio_p95": ratio, "past_filter_timeout": 0, "degraded": 0, "a_seconds": 8.0,
        "loadavg_1min": 3.5, "detail": "Forgot all 5000 memories.",
    }  # fmt: skip
    users = {
        "users": 20, "think_s": 2.0, "n": 140, "inlets_per_s": 8.0, "p50_ms": 40.0,
        "p95_ms": 80.0, "ratio_p50": 1.3, "ratio_p95": 1.6, "past_filter_timeout": 0,
        "degraded": 0, "loadavg_1min": 4.0,
    }  # fmt: skip
    return {"mode": mode, "round": 1, "phases": [phase], "users": [users]}


def test_the_page_shows_each_mode_per_phase_with_the_load() -> None:
    results = {
        "runs": [_run("in-process", 2.47), _run("worker-process", 1.2)],
        "meta": {
            "finished": "2026-12-06T22:00:00Z", "runtime_s": 900.0, "import_items": 5000,
            "b_memories": 200, "loadavg_at_end": [3.0, 3.5, 4.0],
            "modes": ["in-process", "worker-process"],
        },
    }  # fmt: skip
    page = noisy_neighbour.render_markdown(results)
    assert "| phase | round 1 in-process | round 1 worker-process |" in page
    assert "| forget all | 2.47 / 2.47, 0 (3.5) | 1.2 / 1.2, 0 (3.5) |" in page
    assert "| 20 users | 1.3 / 1.6, 0 (4.0) | 1.3 / 1.6, 0 (4.0) |" in page
    assert "MEMORY_WORKER_PROCESS=true" in page
