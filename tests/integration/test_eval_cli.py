"""`python -m service eval` (what `make eval` runs): usage errors, and a stand-in run to its
results (stopping and continuing are tested on the harness: test_eval_harness.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli.main import app
from service.embeddings.encoder import Encoder
from tests.support.locomo_sample import QUESTIONS, TURNS, write_sample


def test_eval_without_a_model_or_data_exits_2_with_a_sentence(tmp_path: Path) -> None:
    runner = CliRunner()
    data = write_sample(tmp_path / "locomo.json")

    no_model = runner.invoke(app, ["eval", "--data", str(data), "--out", str(tmp_path / "r")])
    no_data = runner.invoke(app, ["eval", "--data", str(tmp_path / "none.json"), "--stand-in"])

    assert no_model.exit_code == 2
    assert "name the extraction model: LLM_BASE_URL and LLM_MODEL" in no_model.output
    assert no_data.exit_code == 2
    assert "does not exist" in no_data.output
    assert not (tmp_path / "r").exists()


def test_eval_on_the_stand_in_writes_results_labelled_as_such(
    tmp_path: Path, pg_home: Path, encoder: Encoder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = write_sample(tmp_path / "locomo.json")
    out = pg_home / "run"  # the run's embedded PostgreSQL lives under it (conftest.pg_home)
    (out / "service" / "models").mkdir(parents=True)
    for export in tmp_path_factory.getbasetemp().glob("models*/*.onnx"):
        shutil.copy2(export, out / "service" / "models" / export.name)
    args = ["eval", "--data", str(data), "--out", str(out), "--stand-in", "--quiet-s", "1"]
    runner = CliRunner()

    finished = runner.invoke(app, args)

    assert finished.exit_code == 0, finished.output
    assert f"wrote {out / 'results.json'}" in finished.output
    results = json.loads((out / "results.json").read_text())
    assert results["stand_in"] is True
    assert results["models"]["judge"]["kind"] == "stand-in"
    assert (results["extraction"]["turns"], results["extraction"]["recall"]) == (TURNS, 1.0)
    assert results["qa"]["overall"]["n"] == QUESTIONS
    assert "**Stand-in run**" in (out / "results.md").read_text()
