"""PNG charts of the benchmark results (matplotlib, headless Agg backend).

`plot_retrieval` draws Recall@10 per LoCoMo category and retriever from the document written by
`bench.locomo_retrieval`; `plot_latency` draws context time against the querying user's memory
count from the document written by `bench.latency_scale`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_latency", "plot_retrieval"]

_CATEGORIES = (("1", "multi-hop"), ("2", "temporal"), ("3", "open-domain"), ("4", "single-hop"))


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_retrieval(
    results: Mapping[str, Any],
    path: Path,
    *,
    labels: Mapping[str, str],
    names: Sequence[str] | None = None,
) -> None:
    """Grouped bars of Recall@10 (%) per category and overall, one panel per corpus.

    Args:
        results: `bench.locomo_retrieval` document ({"turns": {retriever: report}, ...}).
        path: the PNG to write (150 dpi).
        labels: retriever key → legend text (Markdown emphasis is dropped).
        names: the retrievers to draw, in order (default: all in the document).
    """
    plt = _pyplot()
    groups = [*_CATEGORIES, ("overall", "overall")]
    corpora = [k for k in ("turns", "observations") if k in results]
    fig, axes = plt.subplots(1, len(corpora), figsize=(7 * len(corpora), 4.6), squeeze=False)
    for ax, kind in zip(axes[0], corpora, strict=True):
        block = results[kind]
        drawn = [n for n in (names or block) if n in block]
        width = 0.8 / len(drawn)
        for offset, name in enumerate(drawn):
            report = block[name]
            values = [
                report["overall"]["recall@10"]
                if key == "overall"
                else report["by_category"][key]["recall@10"]
                for key, _ in groups
            ]
            xs = [i + (offset - (len(drawn) - 1) / 2) * width for i in range(len(groups))]
            bars = ax.bar(xs, values, width, label=labels.get(name, name).replace("**", ""))
            ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
        ax.set_xticks(range(len(groups)), [label for _, label in groups])
        ax.set_ylim(0, 100)
        ax.set_ylabel("Recall@10 (%)")
        ax.set_title(f"LoCoMo, memories = {kind} (n = {block[drawn[0]]['overall']['n']})")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def plot_latency(results: Mapping[str, Any], path: Path) -> None:
    """Log-log lines of p50 and p95 (ms) against the user's memory count, one per path.

    Args:
        results: `bench.latency_scale` document; its "series" maps a path name to rows of
            {"user_rows", "p50_ms", "p95_ms"}.
        path: the PNG to write (150 dpi).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.8))
    for index, (name, rows) in enumerate(results["series"].items()):
        if not rows:
            continue
        xs = [r["user_rows"] for r in rows]
        color = f"C{index}"
        ax.plot(xs, [r["p50_ms"] for r in rows], "o-", color=color, label=f"{name} p50")
        ax.plot(xs, [r["p95_ms"] for r in rows], "o--", color=color, alpha=0.5, label=f"{name} p95")
    ax.axhline(100, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories of the querying user")
    ax.set_ylabel("time per request (ms)")
    total = results.get("meta", {}).get("total_rows")
    ax.set_title(
        f"Context time vs memory count ({total:,} rows in the table)"
        if total
        else "Context time vs memory count"
    )
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
