"""bench/retrieval_sets.py and bench/tune_baselines.py: metrics, fusion, verdicts, grid choice.

Tiny hand-made pools with hand-made unit vectors: no data set and no model are needed.
"""

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from bench.locomo_retrieval import Pool, block_coverage
from bench.retrieval_sets import (
    BaselineConfig,
    BM25Ranker,
    ConvexRanker,
    DenseRanker,
    Evaluation,
    Question,
    RetrievalSet,
    RRFRanker,
    analyse,
    compare,
    evaluate,
    fill_block,
    prefeval_set,
    question_metrics,
    verdict,
)
from bench.tune_baselines import choose, tune_corpus

NOW = datetime(2025, 1, 2, tzinfo=UTC)


def _pool(texts: list[str], vectors: list[list[float]], name: str = "p") -> Pool:
    pool = Pool(
        conversation_id=name,
        kind="facts",
        owner_id=name,
        texts=texts,
        covers=[frozenset({f"{name}{i}"}) for i in range(len(texts))],
        dates=[NOW] * len(texts),
        now=NOW,
    )
    array = np.asarray(vectors, dtype=np.float32)
    pool.vectors = array / np.linalg.norm(array, axis=1, keepdims=True)
    return pool


def _set(pools: list[Pool], questions: list[tuple[int, str, str, list[float]]]) -> RetrievalSet:
    dataset = RetrievalSet(
        name="tiny",
        description="tiny",
        pools=pools,
        questions=[
            Question(p, text, frozenset({gold}), "g", f"q{i}")
            for i, (p, text, gold, _) in enumerate(questions)
        ],
        corpus="facts",
        budgets=(400,),
    )
    for _, text, _, vector in questions:
        v = np.asarray(vector, dtype=np.float32)
        dataset.vectors[text] = v / np.linalg.norm(v)
    return dataset


def test_analyse_drops_function_words_then_stems() -> None:
    assert analyse("The runners were running to the hotels") == ["runner", "run", "hotel"]
    assert analyse("The hotels", stop="none", stem=False) == ["the", "hotels"]


def test_fill_block_skips_an_item_that_does_not_fit_and_takes_a_shorter_one() -> None:
    assert fill_block([0, 1, 2], [30, 80, 60], 100) == [0, 2]
    covers = [{"a"}, {"b"}, {"c"}]
    taken = fill_block([0, 1, 2], [30, 80, 60], 100)
    mine = question_metrics(covers, [0, 1, 2], {100: taken}, {"c"})["block@100"]
    assert mine == block_coverage([0, 1, 2], [30, 80, 60], covers, {"c"}, 100) == 1.0


def test_question_metrics_on_one_relevant_memory() -> None:
    covers = [{"x"}, {"gold"}, {"y"}]
    got = question_metrics(covers, [0, 1, 2], {400: [0], 800: [0, 1]}, {"gold"})
    assert got == {
        "recall@1": 0.0,
        "recall@10": 1.0,
        "mrr": 0.5,
        "block@400": 0.0,
        "block@800": 1.0,
    }


def test_rankers_order_by_their_own_evidence() -> None:
    # memory 0 shares the question's words, memory 1 its direction
    pool = _pool(
        ["hotel quiet nights", "calm place to sleep", "spicy food"], [[1, 0], [0, 1], [-1, 0]]
    )
    dataset = _set([pool], [(0, "which hotel", "p1", [0.1, 1.0])])
    question = dataset.questions[0]
    config = BaselineConfig(k1=1.2, b=0.75)

    def rank(ranker: object) -> list[int]:
        return asyncio.run(ranker.rank(dataset, pool, question))  # type: ignore[attr-defined]

    assert rank(BM25Ranker(config))[0] == 0
    assert rank(DenseRanker())[0] == 1
    assert rank(ConvexRanker(BaselineConfig(dense_weight=1.0)))[0] == 1
    assert rank(ConvexRanker(BaselineConfig(dense_weight=0.0)))[0] == 0
    # RRF: both first places score 1/(k+1) + 1/(k+r); the one ranked higher by the other wins
    assert sorted(rank(RRFRanker(BaselineConfig(rrf_k=60)))[:2]) == [0, 1]


def test_evaluate_averages_per_question_values() -> None:
    pool = _pool(["hotel quiet", "spicy food"], [[1, 0], [0, 1]])
    dataset = _set([pool], [(0, "q hotel", "p0", [1, 0]), (0, "q food", "p0", [0, 1])])
    result = asyncio.run(evaluate(DenseRanker(), dataset))
    assert result.per_question["recall@1"] == [1.0, 0.0]
    assert result.per_question["mrr"] == [1.0, 0.5]
    assert result.means["recall@1"] == 50.0
    assert result.means["block@400"] == 100.0  # both short lines fit


def test_compare_picks_the_best_baseline_per_metric_and_calls_a_tie() -> None:
    ours = Evaluation("ours", "s", {"m": [1.0, 0.0] * 50, "n": [1.0] * 100}, 0.0)
    weak = Evaluation("weak", "s", {"m": [0.0] * 100, "n": [0.0] * 100}, 0.0)
    strong = Evaluation("strong", "s", {"m": [0.0, 1.0] * 50, "n": [0.5] * 100}, 0.0)
    got = compare(ours, [weak, strong])
    assert got["m"]["best_baseline"] == "strong" and got["m"]["diff"] == 0.0
    assert got["m"]["verdict"] == "tie"
    assert got["n"]["best_baseline"] == "strong" and got["n"]["verdict"] == "better"
    assert verdict({"low": -3.0, "high": -0.1}) == "worse"


def test_choose_takes_the_objective_then_mrr_then_the_first_cell() -> None:
    cells = [
        {"scores": {"recall@10": 50.0, "mrr": 30.0}},
        {"scores": {"recall@10": 60.0, "mrr": 20.0}},
        {"scores": {"recall@10": 60.0, "mrr": 25.0}},
        {"scores": {"recall@10": 60.0, "mrr": 25.0}},
    ]
    assert choose(cells) == 2
    with pytest.raises(ValueError):
        choose([])


def test_tuning_sees_only_the_set_it_is_given() -> None:
    # The tuning set holds a question that plain BM25 answers; a dense weight of 0 (BM25 only)
    # must therefore win the convex stage whatever a held-out set would prefer.
    pool = _pool(["zebra stripes", "animal facts", "horse meadow"], [[0, 1], [1, 0], [0.7, 0.7]])
    tuning = _set([pool], [(0, "zebra", "p0", [1, 0])])
    log = asyncio.run(tune_corpus(tuning))
    assert log["questions"] == 1
    assert log["chosen"]["convex"]["dense_weight"] < 0.5
    assert log["dense"]["recall@1"] == 0.0
    weights = [c["config"]["dense_weight"] for c in log["stages"]["4 convex weight"]]
    assert weights == [round(0.1 * i, 1) for i in range(11)]


def test_prefeval_deal_is_even_and_keeps_each_question_with_its_holder(tmp_path: Path) -> None:
    folder = tmp_path / "explicit"
    folder.mkdir()
    for topic in ("a", "b"):
        rows = [{"preference": f"{topic} pref {i}", "question": f"{topic} q {i}"} for i in range(5)]
        (folder / f"{topic}.json").write_text(json.dumps(rows), encoding="utf-8")
    from bench.retrieval_sets import prefeval_rows

    dataset = prefeval_set("pe", prefeval_rows(folder), lambda r: str(r["preference"]), users=3)
    assert sorted(len(p.texts) for p in dataset.pools) == [3, 3, 4]
    for q in dataset.questions:
        pool = dataset.pools[q.pool]
        (index,) = [i for i, c in enumerate(pool.covers) if c == q.evidence]
        assert pool.texts[index].replace("pref", "q") == q.text


def test_the_committed_tuning_log_chose_each_stage_argmax_on_conversations_0_to_4() -> None:
    from bench.retrieval_sets import TUNING_LOG, load_tuned_constants

    log = json.loads(TUNING_LOG.read_text(encoding="utf-8"))
    assert log["split"] == [0, 1, 2, 3, 4]
    for corpus, doc in log["corpora"].items():
        stages = doc["stages"]
        best = {name: cells[choose(cells)]["config"] for name, cells in stages.items()}
        assert doc["chosen"]["bm25"] == best["2 k1 x b"]
        assert doc["chosen"]["rrf"] == best["3 rrf k"]
        assert doc["chosen"]["convex"] == best["4 convex weight"]
        assert len(stages["2 k1 x b"]) == len(log["grid"]["k1"]) * len(log["grid"]["b"])
        assert load_tuned_constants()[corpus]["convex"] == BaselineConfig(**best["4 convex weight"])
