"""Helpers of the reliability tests: budgets, figures, metrics (the fact-echoing LLM answer is
`testkit.extraction_replies.echo_fact`).

Budgets of the longer runs come from the environment so `make reliability` can run them
bigger than `make test` does (every loop is bounded by a count and a time):

| variable | default | meaning |
|---|---|---|
| `RELIABILITY_FUZZ_CASES` | 60 | generated requests of the API fuzz run |
| `RELIABILITY_FUZZ_TIME_S` | 90 | time limit of the fuzz run (seconds) |
| `RELIABILITY_KILL_TURNS` | 40 | outlet calls of the kill -9 run |
| `RELIABILITY_LOAD_USERS` | 8 | simulated users of the short load run |
| `RELIABILITY_LOAD_S` | 8 | its duration (seconds) |
| `RELIABILITY_OUTAGE_S` | 40 | seconds the LLM is down in the long-outage run |
| `RELIABILITY_OUTAGE_TURNS` | 12 | turns arriving during it |
| `RELIABILITY_RACE_ROUNDS` | 6 | race run: interleavings per pair (`make reliability`: 100) |
| `RELIABILITY_RACE_TIME_S` | 240 | time limit of the race run (seconds) |
| `RELIABILITY_RESULTS` | - | a folder: the runs write their figures there as JSON |
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from testkit.live_service import LiveService

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def env_int(name: str, default: int) -> int:
    """An integer budget from the environment."""
    return int(os.environ.get(name) or default)


def record_figures(name: str, figures: dict[str, Any]) -> None:
    """Write `figures` to `$RELIABILITY_RESULTS/<name>.json` when that folder is set."""
    folder = os.environ.get("RELIABILITY_RESULTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(json.dumps(figures, indent=2) + "\n")


def scrape(live: LiveService) -> Samples:
    """`GET /metrics` as {(sample name, sorted labels): value}."""
    response = live.client.get("/metrics")
    assert response.status_code == 200, response.text
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def metric(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when absent)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def renamed_model(target: Path) -> Path:
    """The bundled all-MiniLM-L6-v2 under another folder name (files linked, not copied).

    The service names a model after its folder, so this is "another 384-dimension model"
    to it: the same network, as a switch to a compatible model looks.
    """
    from service.embeddings.encoder import bundled_model_path

    source = bundled_model_path()
    for path in source.rglob("*"):
        if path.is_file() and path.stat().st_size and not path.name.startswith("tmp"):
            link = target / path.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(path)
    return target


def wide_model(target: Path, *, dimension: int = 768) -> Path:
    """A sentence-transformers folder whose vectors have `dimension` numbers.

    One BERT layer with random weights and the bundled model's tokenizer: what matters here
    is only the shape of its output, as after a switch to a larger model.
    """
    from transformers import BertConfig, BertModel

    from service.embeddings.encoder import bundled_model_path

    source = bundled_model_path()
    config = BertConfig(
        vocab_size=30522,
        hidden_size=dimension,
        num_hidden_layers=1,
        num_attention_heads=12,
        intermediate_size=dimension * 2,
    )
    BertModel(config).save_pretrained(str(target))
    for name in (
        "vocab.txt",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "sentence_bert_config.json",
        "modules.json",
    ):
        (target / name).write_bytes((source / name).read_bytes())
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text())
    pooling["word_embedding_dimension"] = dimension
    (target / "1_Pooling").mkdir()
    (target / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return target
