"""bench/locomo_retrieval.py: the retrieval metrics and the BM25 tokenizer, by exact values."""

import math

import pytest

from bench.locomo_retrieval import (
    FUNCTION_WORDS,
    block_coverage,
    bootstrap_difference,
    hit_at_k,
    ndcg_at_k,
    question_metrics,
    recall_at_k,
    reciprocal_rank,
    summarize,
    tokenize,
)

# Ranked memories, best first, each with the dia_ids it covers: turns cover one id, an
# observation fact may cover several or none.
RANKED = [{"D1:1"}, {"D2:4", "D2:5"}, set(), {"D3:1"}, {"D1:2"}]
EVIDENCE = ("D1:2", "D2:5", "D9:9")


def test_recall_counts_the_share_of_evidence_ids_covered_within_k() -> None:
    assert recall_at_k(RANKED, EVIDENCE, 1) == 0.0
    assert recall_at_k(RANKED, EVIDENCE, 2) == pytest.approx(1 / 3)
    assert recall_at_k(RANKED, EVIDENCE, 5) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, EVIDENCE, 50) == pytest.approx(2 / 3)


def test_recall_counts_an_id_once_when_several_memories_cover_it() -> None:
    assert recall_at_k([{"D1:1"}, {"D1:1", "D1:2"}], ["D1:1", "D1:2"], 1) == 0.5
    assert recall_at_k([{"D1:1"}, {"D1:1"}], ["D1:1", "D1:2"], 2) == 0.5


def test_hit_is_one_as_soon_as_any_evidence_id_is_covered() -> None:
    assert hit_at_k(RANKED, EVIDENCE, 1) == 0.0
    assert hit_at_k(RANKED, EVIDENCE, 2) == 1.0
    assert hit_at_k(RANKED, ["D9:9"], 10) == 0.0


def test_reciprocal_rank_is_one_over_the_first_relevant_rank() -> None:
    assert reciprocal_rank(RANKED, EVIDENCE) == 0.5
    assert reciprocal_rank(RANKED, ["D1:1"]) == 1.0
    assert reciprocal_rank(RANKED, ["D1:2"]) == 0.2
    assert reciprocal_rank(RANKED, ["D9:9"]) == 0.0
    assert reciprocal_rank([], ["D1:1"]) == 0.0


def test_ndcg_uses_binary_gains_and_the_pool_s_relevant_count() -> None:
    # relevant at ranks 2 and 5; the pool holds 3 relevant memories
    dcg = 1 / math.log2(3) + 1 / math.log2(6)
    ideal = 1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(RANKED, EVIDENCE, 10, 3) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(RANKED, EVIDENCE, 10, 3) == pytest.approx(0.47762, abs=1e-5)


def test_ndcg_is_one_for_a_perfect_ranking_and_zero_without_relevant_memories() -> None:
    assert ndcg_at_k([{"D1:1"}, {"D1:2"}, {"D5:5"}], ["D1:1", "D1:2"], 10, 2) == 1.0
    assert ndcg_at_k(RANKED, ["D9:9"], 10, 0) == 0.0
    assert ndcg_at_k(RANKED, ["D9:9"], 10, 1) == 0.0


def test_ndcg_ideal_is_cut_at_k() -> None:
    ranked = [{f"D1:{i}"} for i in range(1, 13)]
    evidence = [f"D1:{i}" for i in range(1, 13)]
    assert ndcg_at_k(ranked, evidence, 10, 12) == 1.0


def test_question_metrics_and_summary_report_percentages_per_category() -> None:
    first = question_metrics(RANKED, EVIDENCE, 3)
    assert first == {
        "recall@1": 0.0,
        "recall@5": pytest.approx(2 / 3),
        "recall@10": pytest.approx(2 / 3),
        "recall@25": pytest.approx(2 / 3),
        "recall@50": pytest.approx(2 / 3),
        "hit@10": 1.0,
        "ndcg@10": pytest.approx(0.47762, abs=1e-5),
        "mrr": 0.5,
    }
    second = question_metrics([{"D1:1"}], ["D1:1"], 1)
    summary = summarize([{"category": 1, "metrics": first}, {"category": 4, "metrics": second}])
    assert summary["overall"]["n"] == 2
    assert summary["overall"]["recall@1"] == 50.0
    assert summary["overall"]["recall@10"] == 83.3
    assert summary["overall"]["mrr"] == 75.0
    assert summary["by_category"]["1"]["recall@10"] == 66.7
    assert summary["by_category"]["4"]["ndcg@10"] == 100.0
    assert summary["by_category"]["2"] == {"n": 0}


def test_tokenizer_lowercases_splits_on_non_alphanumerics_and_drops_stop_words() -> None:
    assert tokenize("Caroline: When did she go to the LGBTQ support group?") == [
        "caroline",
        "did",
        "lgbtq",
        "support",
        "group",
    ]
    assert tokenize("It's 7:30 on 8-May-2023, e-mail me@x.org") == [
        "s",
        "7",
        "30",
        "8",
        "2023",
        "e",
        "mail",
        "x",
        "org",
    ]


def test_tokenizer_keeps_words_unstemmed_and_drops_non_ascii_letters() -> None:
    assert tokenize("Running runs RAN") == ["running", "runs", "ran"]
    assert tokenize("café naïve Zürich") == ["caf", "na", "ve", "z", "rich"]
    assert tokenize("the and of") == []


def test_the_function_word_stop_list_keeps_content_words_that_sklearn_drops() -> None:
    question = "What did Melanie find when she went to see the fire show?"
    assert tokenize(question) == ["did", "melanie", "went"]
    assert tokenize(question, FUNCTION_WORDS) == ["melanie", "find", "went", "see", "fire", "show"]


def test_block_coverage_fills_the_budget_best_first_and_skips_what_does_not_fit() -> None:
    covers = [{"D1:1"}, {"D2:4", "D2:5"}, {"D3:1"}, {"D1:2"}]
    costs = [30, 50, 10, 15]
    # 30 + 50 = 80 of 90; D3:1 (10) still fits, D1:2 (15) no longer does
    assert block_coverage([0, 1, 2, 3], costs, covers, ("D2:5", "D3:1", "D1:2"), 90) == 2 / 3
    # a long first item is skipped and the shorter ones after it are kept
    assert block_coverage([1, 3, 2], costs, covers, ("D1:2", "D3:1"), 40) == 1.0
    assert block_coverage([], costs, covers, ("D1:1",), 400) == 0.0


def test_bootstrap_difference_is_paired_and_reproducible() -> None:
    ours = [1.0, 1.0, 0.0, 1.0] * 25
    base = [0.0, 1.0, 0.0, 0.0] * 25
    first = bootstrap_difference(ours, base, resamples=500, seed=3)
    assert first == {"diff": 50.0, "low": 40.0, "high": 59.5}
    assert first == bootstrap_difference(ours, base, resamples=500, seed=3)
    same = bootstrap_difference(base, base, resamples=200)
    assert same == {"diff": 0.0, "low": 0.0, "high": 0.0}
    with pytest.raises(ValueError, match="same length"):
        bootstrap_difference([1.0], [1.0, 0.0])
