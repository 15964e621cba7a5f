"""The model evaluation (`python -m service eval`, bench/eval_locomo.py) run end to end on a
tiny LoCoMo-shaped conversation (tests/support/locomo_sample.py: 9 user turns, 7 facts, 5
questions of categories 1–4) through the real filter and a real service process, with the
local stand-in model playing extractor, answer model and judge.

Each run's service uses the test database (no initdb) and a copy of the session's ONNX export
(no export), so a run takes seconds.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.eval_llm import Endpoint
from bench.eval_locomo import EvalOptions, QuietReporter, evaluate
from bench.eval_proxy import classify_request
from bench.eval_standin import StandIn, question_of
from service.embeddings.encoder import Encoder
from testkit.extraction_replies import new_user_message
from testkit.llm_stub import LLMStub, StubReply
from tests.support.locomo_sample import FACTS, QUESTIONS, TURNS, sample, write_sample

SECRET = "sk-eval-test-secret-0123456789"


@pytest.fixture
def stub() -> Iterator[LLMStub]:
    with LLMStub(StandIn([sample()])) as server:
        yield server


@pytest.fixture
def make_options(
    tmp_path: Path,
    database_url: str,
    encoder: Encoder,
    tmp_path_factory: pytest.TempPathFactory,
    stub: LLMStub,
) -> Callable[..., EvalOptions]:
    data = write_sample(tmp_path / "locomo.json")
    exports = sorted(tmp_path_factory.getbasetemp().glob("models*/*.onnx"))
    assert exports, "the session encoder fixture exports the model to ONNX"

    def make(*, answer_timeout_s: float = 30.0, **overrides: Any) -> EvalOptions:
        out = tmp_path / "run"
        models = out / "service" / "models"
        if not models.exists():
            models.mkdir(parents=True)
            for export in exports:
                shutil.copy2(export, models / export.name)
        extraction = Endpoint(
            base_url=stub.base_url, model="stub-model", api_key=SECRET, timeout_s=30.0
        )
        answer = Endpoint(
            base_url=stub.base_url,
            model="stub-model",
            api_key=SECRET,
            timeout_s=answer_timeout_s,
            attempts=3,
            backoff_s=0.01,
        )
        settings: dict[str, Any] = {
            "data": data,
            "out": out,
            "extraction": extraction,
            "answer": answer,
            "judge": answer,
            "batch_messages": 1,
            "quiet_s": 1.0,
            "inlet_timeout_s": 20.0,
            "drain_timeout_s": 120.0,
            "service_env": {"DATABASE_URL": database_url, "MEMORY_CONTEXT_DEADLINE_S": "20"},
        }
        settings.update(overrides)
        return EvalOptions(**settings)

    return make


def _run(options: EvalOptions, encoder: Encoder) -> dict[str, Any] | None:
    return evaluate(options, QuietReporter(), encoder=encoder)


def _by_category_n(results: dict[str, Any]) -> dict[str, int]:
    return {key: row["n"] for key, row in results["qa"]["by_category"].items()}


def _service_requests(stub: LLMStub) -> list[dict[str, Any]]:
    """The requests that came from the service (through the relay), not answers or verdicts."""
    return [
        r
        for r in stub.requests
        if question_of(r) is None and "<reference_answer>" not in str(r.get("messages"))
    ]


def test_stand_in_with_right_answers_scores_full_marks(
    make_options: Callable[..., EvalOptions], encoder: Encoder, stub: LLMStub
) -> None:
    options = make_options()
    results = _run(options, encoder)

    assert results is not None
    extraction = results["extraction"]
    assert (extraction["turns"], extraction["turns_done"], extraction["turns_failed"]) == (
        TURNS,
        TURNS,
        0,
    )
    assert (extraction["memories"], extraction["facts"], extraction["matched"]) == (7, FACTS, 7)
    assert (extraction["precision"], extraction["recall"]) == (1.0, 1.0)
    llm = extraction["llm"]
    assert (llm["extraction_calls"], llm["repair_retries"], llm["parse_failures"]) == (9, 0, 0)
    assert (llm["timeouts"], llm["repeated_after_failure"]) == (0, 0)
    # tokens are the endpoint's own usage figures (the stand-in counts words)
    service_requests = _service_requests(stub)
    assert llm["requests"] == len(service_requests)
    assert llm["prompt_tokens"] == sum(
        len(str(m["content"]).split()) for r in service_requests for m in r["messages"]
    )
    assert [s["memories_per_session"] for s in extraction["by_speaker"]] == [
        {"1": 2, "2": 2},
        {"1": 2, "2": 1},
    ]
    overall = results["qa"]["overall"]
    assert (overall["n"], overall["correct"], overall["accuracy"], overall["f1"]) == (
        QUESTIONS,
        5,
        1.0,
        1.0,
    )
    assert _by_category_n(results) == {"1": 1, "2": 1, "3": 1, "4": 2}
    assert results["qa"]["answer_calls"]["calls"] == 5
    assert results["models"]["extraction"]["model"] == "stub-model"
    assert results["models"]["extraction"]["kind"] == "local"
    # the results name the run; no file of the run holds the endpoint's key
    written = [options.out / n for n in ("results.json", "results.md", "state.json")]
    assert all(p.exists() for p in written)
    assert "| **overall** | 5 | 5 | 100.0 % | 1.000 |" in written[1].read_text()
    for path in [*written, options.out / "service.log"]:
        assert SECRET not in path.read_text(encoding="utf-8")


def test_model_wrong_on_purpose_scores_zero(
    make_options: Callable[..., EvalOptions], encoder: Encoder, stub: LLMStub
) -> None:
    stub.responder = StandIn([sample()], answers="wrong")

    results = _run(make_options(), encoder)

    assert results is not None
    overall = results["qa"]["overall"]
    assert (overall["n"], overall["correct"], overall["accuracy"], overall["f1"]) == (
        5,
        0,
        0.0,
        0.0,
    )
    assert (overall["unanswered"], overall["verdict_unreadable"]) == (0, 0)
    assert {q["verdict"] for q in results["questions"]} == {"WRONG"}
    # the extraction side is unaffected
    assert (results["extraction"]["precision"], results["extraction"]["recall"]) == (1.0, 1.0)


def test_rambling_model_counts_parse_failures_and_finishes(
    make_options: Callable[..., EvalOptions], encoder: Encoder, stub: LLMStub
) -> None:
    stub.responder = StandIn([sample()], extraction="prose", judge="prose")

    results = _run(make_options(), encoder)

    assert results is not None
    extraction = results["extraction"]
    # each turn: the answer, the service's one repair retry, both prose → the turn fails
    assert (extraction["turns_done"], extraction["turns_failed"]) == (0, TURNS)
    llm = extraction["llm"]
    assert (llm["extraction_calls"], llm["repair_retries"], llm["parse_failures"]) == (9, 9, 18)
    assert (extraction["memories"], extraction["precision"], extraction["recall"]) == (0, None, 0.0)
    overall = results["qa"]["overall"]
    # the answers are right (F1 1.0) but no verdict can be read, so none counts as correct
    assert (overall["n"], overall["correct"], overall["verdict_unreadable"], overall["f1"]) == (
        5,
        0,
        5,
        1.0,
    )


def test_endpoint_that_times_out_is_retried_then_counted(
    make_options: Callable[..., EvalOptions], encoder: Encoder, stub: LLMStub
) -> None:
    stand_in = StandIn([sample()])
    seen: Counter[str] = Counter()

    def flaky(request: dict[str, Any]) -> str | StubReply:
        question = question_of(request)
        if question is not None:
            seen[question] += 1
            if question == "What is the name of Ada's dog?":
                return StubReply(delay_s=2.0, text="Pixel")  # always later than the timeout
            if question == "Where is Ada moving?" and seen[question] == 1:
                return StubReply(status=429, text="slow down")
        elif classify_request(request) == "extraction":
            text = new_user_message(request)  # a retry shows other memories next to it
            seen[text] += 1
            if "moving to Porto" in text and seen[text] == 1:
                return StubReply(delay_s=3.0, text='{"operations": []}')  # the relay gives up
        return stand_in(request)

    stub.responder = flaky
    options = make_options(answer_timeout_s=0.5)
    options.extraction = Endpoint(base_url=stub.base_url, model="stub-model", timeout_s=1.0)

    results = _run(options, encoder)

    assert results is not None
    calls = results["qa"]["answer_calls"]
    assert (calls["calls"], calls["retries"], calls["timeouts"], calls["http_errors"]) == (
        5,
        3,
        3,
        1,
    )
    assert calls["failed"] == 1
    overall = results["qa"]["overall"]
    assert (overall["n"], overall["correct"], overall["unanswered"]) == (5, 4, 1)
    dog = next(q for q in results["questions"] if q["question"] == "What is the name of Ada's dog?")
    assert (dog["answer_error"], dog["answer_tries"], dog["correct"]) == ("timeout", 3, False)
    # the extraction call that timed out was retried by the service's job queue and then done
    llm = results["extraction"]["llm"]
    assert (llm["timeouts"], llm["repeated_after_failure"], llm["extraction_calls"]) == (1, 1, 9)
    assert (results["extraction"]["turns_done"], results["extraction"]["recall"]) == (TURNS, 1.0)


def test_stopped_run_resumes_where_it_stopped(
    make_options: Callable[..., EvalOptions], encoder: Encoder, stub: LLMStub
) -> None:
    assert _run(make_options(stop_after_turns=4), encoder) is None
    assert _run(make_options(stop_after_questions=2), encoder) is None
    results = _run(make_options(), encoder)

    assert results is not None
    assert results["resumed"] == 2
    # every turn was extracted once and every question asked once over the three runs
    assert results["extraction"]["llm"]["extraction_calls"] == TURNS
    assert results["extraction"]["llm"]["repeated_after_failure"] == 0
    asked = Counter(q for r in stub.requests if (q := question_of(r)) is not None)
    assert sorted(asked.values()) == [1] * QUESTIONS
    extraction = results["extraction"]
    assert (extraction["turns"], extraction["turns_done"], extraction["memories"]) == (TURNS, 9, 7)
    assert (extraction["precision"], extraction["recall"]) == (1.0, 1.0)
    overall = results["qa"]["overall"]
    assert (overall["n"], overall["correct"], overall["accuracy"]) == (QUESTIONS, 5, 1.0)
