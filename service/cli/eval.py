"""`python -m service eval …` — evaluate an extraction model (and an answer and a judge model)
on LoCoMo conversations through the real filter and service (docs/howto/choose-a-model.md).

The harness lives in `bench/` of a checkout (`bench/eval_locomo.py`); the LoCoMo data is not
shipped and is named with `--data`. Every figure comes from the models given here; nothing is
sent anywhere but their endpoints (and the service the command starts on 127.0.0.1).

Exit codes: 0 done, 1 the run failed, 2 wrong usage, 3 stopped before the end (run the same
command again to continue), 130 interrupted (same).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["evaluate_command"]

EXIT_STOPPED = 3


class _ProgressReporter:
    """A rich progress bar per phase; notes are printed above it."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task: TaskID | None = None

    def phase(self, name: str, total: int | None, done: int = 0) -> None:
        if self.task is not None:
            self.progress.stop_task(self.task)  # stays on screen, finished
        self.task = self.progress.add_task(name, total=total, completed=done)

    def advance(self) -> None:
        if self.task is not None:
            self.progress.advance(self.task)

    def note(self, line: str) -> None:
        self.progress.console.print(escape(line))


def _bench() -> Any:
    """The harness module, or exit 2 with a sentence when this is not a checkout."""
    try:
        from bench import eval_locomo
    except ImportError:
        typer.echo(
            "error: the evaluation harness (bench/eval_locomo.py) is part of the repository "
            "checkout; run this command from the checkout's root (make eval)",
            err=True,
        )
        raise typer.Exit(code=2) from None
    return eval_locomo


@contextlib.contextmanager
def _stand_in(data: Path) -> Iterator[str]:
    """Serve the stand-in model for the conversations in `data`; yields its base URL."""
    from bench.eval_standin import StandIn
    from bench.locomo import load_conversations
    from testkit.llm_stub import LLMStub

    stub = LLMStub(StandIn(load_conversations(data), answers="notes")).start()
    try:
        yield stub.base_url
    finally:
        stub.stop()


def evaluate_command(
    data: Path = typer.Option(  # noqa: B008 - typer declares options this way
        ...,
        "--data",
        envvar="EVAL_LOCOMO_PATH",
        help="The LoCoMo file (locomo10.json); it is not shipped with the service.",
    ),
    conversation: list[int] = typer.Option(  # noqa: B008 - typer declares options this way
        [0], "--conversation", "-c", help="0-based conversation index (repeatable; default 0)."
    ),
    all_conversations: bool = typer.Option(
        False, "--all-conversations", help="Every conversation in the file (long)."
    ),
    sessions: int | None = typer.Option(
        None, "--sessions", min=1, help="Replay only the first N sessions of each conversation."
    ),
    questions: int = typer.Option(
        50, "--questions", min=0, help="At most N questions per conversation (categories 1–4)."
    ),
    all_questions: bool = typer.Option(
        False, "--all-questions", help="Every question of categories 1–4."
    ),
    out: Path = typer.Option(  # noqa: B008
        Path("eval-run"), "--out", help="Run directory: state, service database, results."
    ),
    llm_base_url: str | None = typer.Option(
        None, envvar="LLM_BASE_URL", help="Extraction endpoint (OpenAI-compatible, …/v1)."
    ),
    llm_model: str | None = typer.Option(None, envvar="LLM_MODEL", help="Extraction model."),
    llm_api_key: str | None = typer.Option(
        None, envvar="LLM_API_KEY", help="Key of the extraction endpoint.", show_default=False
    ),
    llm_timeout_s: float = typer.Option(
        60.0, envvar="LLM_TIMEOUT_S", min=1, help="Seconds one model call may take."
    ),
    json_mode: bool = typer.Option(
        True,
        "--json-mode/--no-json-mode",
        envvar="LLM_JSON_MODE",
        help="Ask the extraction model for JSON mode (turn off for servers that reject it).",
    ),
    answer_base_url: str | None = typer.Option(
        None, envvar="EVAL_ANSWER_BASE_URL", help="Answer endpoint (default: extraction's)."
    ),
    answer_model: str | None = typer.Option(
        None, envvar="EVAL_ANSWER_MODEL", help="Answer model (default: extraction's)."
    ),
    answer_api_key: str | None = typer.Option(
        None, envvar="EVAL_ANSWER_API_KEY", help="Key of the answer endpoint.", show_default=False
    ),
    judge_base_url: str | None = typer.Option(
        None, envvar="EVAL_JUDGE_BASE_URL", help="Judge endpoint (default: the answer one)."
    ),
    judge_model: str | None = typer.Option(
        None, envvar="EVAL_JUDGE_MODEL", help="Judge model (default: the answer model)."
    ),
    judge_api_key: str | None = typer.Option(
        None, envvar="EVAL_JUDGE_API_KEY", help="Key of the judge endpoint.", show_default=False
    ),
    attempts: int = typer.Option(
        4, min=1, max=20, help="Tries per answer or judge call (429, 5xx, timeouts)."
    ),
    backoff_s: float = typer.Option(
        2.0, min=0, help="Wait before the second try (doubles after each further one)."
    ),
    batch_messages: int | None = typer.Option(
        None, min=1, max=100, help="MEMORY_BATCH_MESSAGES of the service (default 5)."
    ),
    quiet_s: float = typer.Option(
        10.0, min=0.1, help="MEMORY_BATCH_QUIET_S of the service (a replayed chat is quiet)."
    ),
    stand_in: bool = typer.Option(
        False, "--stand-in", help="Use the local stand-in model (tests the harness, no model)."
    ),
    stop_after_turns: int | None = typer.Option(
        None, min=0, help="Stop after N turns of this invocation (a later run continues)."
    ),
    stop_after_questions: int | None = typer.Option(
        None, min=0, help="Stop after N questions of this invocation (a later run continues)."
    ),
    fresh: bool = typer.Option(False, "--fresh", help="Discard the run in --out and start over."),
) -> None:
    """Measure extraction (precision, recall, tokens, seconds per turn) and answer accuracy."""
    harness = _bench()
    from bench.eval_llm import Endpoint

    if not data.is_file():
        typer.echo(f"error: the LoCoMo file {data} does not exist", err=True)
        raise typer.Exit(code=2)
    if all_conversations:
        from bench.locomo import load_conversations

        conversation = list(range(len(load_conversations(data))))
    console = Console(highlight=False, soft_wrap=True)
    with contextlib.ExitStack() as stack:
        if stand_in:
            url = stack.enter_context(_stand_in(data))
            llm_base_url = answer_base_url = judge_base_url = url
            llm_model = answer_model = judge_model = "stub-model"
        if not llm_base_url or not llm_model:
            typer.echo(
                "error: name the extraction model: LLM_BASE_URL and LLM_MODEL "
                "(or --stand-in to test the harness without a model)",
                err=True,
            )
            raise typer.Exit(code=2)
        answer_base_url = answer_base_url or llm_base_url
        answer_model = answer_model or llm_model
        answer_api_key = answer_api_key or (
            llm_api_key if answer_base_url == llm_base_url else None
        )
        judge_base_url = judge_base_url or answer_base_url
        judge_model = judge_model or answer_model
        judge_api_key = judge_api_key or (
            answer_api_key if judge_base_url == answer_base_url else None
        )

        def endpoint(url: str, model: str, key: str | None, **extra: Any) -> Any:
            return Endpoint(
                base_url=url,
                model=model,
                api_key=key,
                timeout_s=llm_timeout_s,
                attempts=attempts,
                backoff_s=backoff_s,
                **extra,
            )

        options = harness.EvalOptions(
            data=data,
            out=out,
            extraction=endpoint(llm_base_url, llm_model, llm_api_key, json_mode=json_mode),
            answer=endpoint(answer_base_url, answer_model, answer_api_key),
            judge=endpoint(judge_base_url, judge_model, judge_api_key),
            conversations=tuple(conversation),
            sessions=sessions,
            questions=None if all_questions else questions,
            batch_messages=batch_messages,
            quiet_s=quiet_s,
            stand_in=stand_in,
            stop_after_turns=stop_after_turns,
            stop_after_questions=stop_after_questions,
            fresh=fresh,
        )
        with Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        ) as progress:
            try:
                results = harness.evaluate(options, _ProgressReporter(progress))
            except harness.EvalError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(code=1) from None
            except KeyboardInterrupt:
                typer.echo(
                    f"interrupted; the run in {out} continues where it stopped when the same "
                    "command is run again",
                    err=True,
                )
                raise typer.Exit(code=130) from None
    if results is None:
        raise typer.Exit(code=EXIT_STOPPED)
    console.print(harness.render_markdown(results), markup=False)
    console.print(f"wrote {out / 'results.json'} and {out / 'results.md'}", markup=False)
