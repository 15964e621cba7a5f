"""`python -m service summarize …` and `python -m service restore <id>` — the summarizer for
cron, systemd timers and Kubernetes CronJobs (DESIGN §8; docs/howto/summarizer.md).

Both attach to the service's database (embedded in `MEMORY_STATE_DIR` unless
`DATABASE_URL` is set) and use the same settings as the service. `summarize` without
`--dry-run` needs the LLM (`LLM_BASE_URL`, `LLM_MODEL`) and loads the embedding model.

Exit codes: 0 done (refusals by the guard included: they are printed), 1 an error or the LLM
could not be reached, 2 wrong usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from service.cli.failures import fail
from service.config import Settings
from service.core import consolidation as policy
from service.core.commands import counted
from service.core.records import OwnerKind
from service.errors import MemoryServiceError
from service.flows import consolidation
from service.flows.consolidation import Outcome, Owner, OwnerResult, RunReport
from service.flows.runtime import Runtime

__all__ = ["restore", "summarize"]

_PREVIEW_CHARS = 70


def summarize(
    user: list[str] = typer.Option(  # noqa: B008 - typer declares options this way
        [], "--user", metavar="ID", help="Consolidate this user's memories (repeatable)."
    ),
    folder: list[str] = typer.Option(  # noqa: B008
        [], "--folder", metavar="ID", help="Consolidate this folder's Project Memory (repeatable)."
    ),
    all_owners: bool = typer.Option(
        False, "--all", help="Every user and folder with memories past the age gate."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the plan; change nothing and call no LLM."
    ),
    show_text: bool = typer.Option(
        False, "--show-text", help="Print the memories' texts in the plan (they are private)."
    ),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Tracebacks and debug logs."),
) -> None:
    """Merge clusters of old memories into summaries, archive the sources, prune beyond the cap."""
    owners = [Owner(OwnerKind.USER, u) for u in user] + [Owner(OwnerKind.FOLDER, f) for f in folder]
    if not owners and not all_owners:
        typer.echo(
            "error: say whose memories to consolidate: --user ID, --folder ID or --all", err=True
        )
        raise typer.Exit(code=2)
    if owners and all_owners:
        typer.echo("error: --all cannot be combined with --user or --folder", err=True)
        raise typer.Exit(code=2)
    _logging(verbose)
    try:
        report = asyncio.run(
            _summarize(None if all_owners else owners, dry_run=dry_run, show_text=show_text)
        )
    except MemoryServiceError as exc:
        fail(exc, verbose)
    if report.failed:
        typer.echo(
            f"error: the run stopped: {report.stopped or 'the LLM could not answer'}; "
            "the owners not yet done were left as they were",
            err=True,
        )
        raise typer.Exit(code=1)


def restore(
    memory_id: str = typer.Argument(
        ...,
        metavar="MEMORY_ID",
        help="uuid of a summary (or of one of its merged sources, or of a pruned memory).",
    ),
    show_text: bool = typer.Option(False, "--show-text", help="Print the restored texts."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Tracebacks and debug logs."),
) -> None:
    """Undo a merge: the summary's sources become active again and the summary is archived."""
    try:
        parsed = uuid.UUID(memory_id)
    except ValueError:
        typer.echo(f"error: {memory_id!r} is not a memory uuid", err=True)
        raise typer.Exit(code=2) from None
    _logging(verbose)
    try:
        result = asyncio.run(_restore(parsed))
    except MemoryServiceError as exc:
        fail(exc, verbose)
    if result.summary is not None:
        typer.echo(
            f"restored {counted(len(result.restored), 'memory', 'memories')} "
            f"of summary {result.summary.id} "
            f"(#{result.summary.seq}); the summary is archived"
        )
    else:
        typer.echo(f"restored pruned memory {memory_id}")
    for memory in result.restored:
        text = f"  {_preview(memory.content)}" if show_text else ""
        typer.echo(f"  #{memory.seq} {memory.id} ({memory.bank.label}){text}")
    typer.echo("restored memories are pinned: the summarizer will not merge or prune them again")


# --- running ------------------------------------------------------------------------------


async def _summarize(owners: list[Owner] | None, *, dry_run: bool, show_text: bool) -> RunReport:
    settings = Settings()
    console = Console(highlight=False, soft_wrap=True)
    async with _runtime(settings) as rt:
        if not dry_run and not rt.llm.configured:
            raise MemoryServiceError(
                "the summarizer needs an LLM: set LLM_BASE_URL and LLM_MODEL (or use --dry-run)"
            )
        with Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        ) as progress:
            task = progress.add_task("summarizing", total=None)

            def on_owners(n: int) -> None:
                progress.update(task, total=n)

            def on_result(result: OwnerResult) -> None:
                progress.advance(task)
                progress.update(task, description=f"summarizing ({result.owner})")
                _print_result(result, show_text=show_text, console=progress.console)

            report = await consolidation.summarize(
                rt, owners=owners, dry_run=dry_run, on_owners=on_owners, on_result=on_result
            )
    _print_totals(report, dry_run=dry_run)
    return report


async def _restore(memory_id: uuid.UUID) -> consolidation.RestoreResult:
    async with _runtime(Settings()) as rt:
        return await consolidation.restore(rt, memory_id=memory_id, actor="cli")


@contextlib.asynccontextmanager
async def _runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """The service's parts for one command, as the service builds them (service/bootstrap);
    the job queue is built but never opened.
    """
    from service import bootstrap

    async with bootstrap.database_url(settings) as url:
        await bootstrap.require_head(url)
        async with bootstrap.open_runtime(settings, url=url, pool_size=2) as rt:
            yield rt


# --- output -------------------------------------------------------------------------------


def _print_result(result: OwnerResult, *, show_text: bool, console: Console) -> None:
    plan = result.plan
    head = f"{result.owner}: {plan.active_before} active"
    if result.outcome is Outcome.NOTHING and not result.skipped:
        return
    if result.outcome is Outcome.REFUSED:
        console.print(f"{head}; refused: {result.detail}", markup=False, highlight=False)
        return
    if result.outcome is Outcome.FAILED:
        console.print(f"{head}; left as it was: {result.detail}", markup=False, highlight=False)
        return
    if result.outcome is Outcome.PLANNED:
        verdict = f"refused: {plan.refused}" if plan.refused else f"→ {plan.active_after} after"
        if plan.empty:
            return
        console.print(f"{head} {verdict}", markup=False, highlight=False)
        texts = {m.seq: m.content for c in plan.clusters for m in c.members}
        texts.update({m.seq: m.content for m in plan.prune})
        for line in policy.describe(plan):
            ids = " ".join(f"#{s}" for s in line.seqs)
            console.print(
                f"  {line.action:<16} {line.bank.label:<20} {ids}", markup=False, highlight=False
            )
            if show_text:
                for seq in line.seqs:
                    console.print(
                        f"      #{seq} {_preview(texts[seq])}", markup=False, highlight=False
                    )
        return
    console.print(
        f"{head} → {result.active_after}; "
        f"{counted(len(result.summaries), 'summary', 'summaries')} of "
        f"{counted(result.merged, 'memory', 'memories')}, {result.pruned} pruned",
        markup=False,
        highlight=False,
    )
    for summary in result.summaries:
        text = f"  {_preview(summary.content)}" if show_text else ""
        console.print(
            f"  summary #{summary.seq} {summary.id} ({summary.bank.label}){text}",
            markup=False,
            highlight=False,
        )
    for reason in result.skipped:
        console.print(f"  left as it was: {reason}", markup=False, highlight=False)


def _print_totals(report: RunReport, *, dry_run: bool) -> None:
    results = report.results
    if dry_run:
        planned = [r for r in results if not r.plan.empty]
        refused = sum(r.plan.refused is not None for r in planned)
        typer.echo(
            f"dry run: {counted(len(results), 'owner', 'owners')} looked at; "
            f"{len(planned) - refused} would "
            f"change, {refused} would be refused; nothing was changed"
        )
        return
    merged = sum(r.merged for r in results)
    pruned = sum(r.pruned for r in results)
    summaries = sum(len(r.summaries) for r in results)
    typer.echo(
        f"{counted(len(results), 'owner', 'owners')} looked at: "
        f"{report.count(Outcome.APPLIED)} changed "
        f"({counted(summaries, 'summary', 'summaries')} of "
        f"{counted(merged, 'memory', 'memories')}, {pruned} pruned), "
        f"{report.count(Outcome.REFUSED)} refused by the guard, "
        f"{report.count(Outcome.NOTHING)} with nothing to do"
    )


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW_CHARS else flat[: _PREVIEW_CHARS - 1] + "…"


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        logging.getLogger("pgserver").setLevel(logging.WARNING)
