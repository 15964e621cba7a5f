"""The retry schedule of extraction jobs (service/core/retries.py)."""

from __future__ import annotations

from service.core.retries import RetryPolicy


def test_waits_double_up_to_the_cap() -> None:
    policy = RetryPolicy(base_s=4, max_wait_s=300)
    assert [policy.wait_s(k) for k in range(9)] == [4, 8, 16, 32, 64, 128, 256, 300, 300]
    assert policy.wait_s(10_000) == 300


def test_an_llm_outage_is_retried_for_a_day_and_other_errors_five_times() -> None:
    policy = RetryPolicy(base_s=4, max_wait_s=300, give_up_after_s=86_400, max_attempts=5)
    # 4 + 8 + … + 256 = 508 s in 7 waits, then 300 s each: 86,400 s after 294 attempts
    assert policy.waited_s(7) == 508
    assert policy.waited_s(294) == 508 + 300 * 287 == 86_608
    assert policy.tries_again(outage=True, attempts=292) is True
    assert policy.tries_again(outage=True, attempts=294) is False
    assert [policy.tries_again(outage=False, attempts=k) for k in range(5)] == [
        True,
        True,
        True,
        True,
        False,
    ]
