"""API fuzz run over the OpenAPI schema (schemathesis): no request may get a 5xx.

A NUL character in any text that reaches PostgreSQL (which cannot store it) and a page
offset beyond PostgreSQL's bigint are refused by PostgreSQL with a `DataError`; reads and
writes (`storage/db.py`, `unit_of_work` and `reads`) answer those with a 400 and a sentence.
The generated requests are derandomized, so a run repeats exactly.
"""

from __future__ import annotations

import pytest

from bench.fuzz_api import run_fuzz
from testkit.live_service import LiveService
from tests.reliability.support import env_int, record_figures


@pytest.mark.timeout(600)  # `make reliability` gives the fuzz run 300 s
def test_no_generated_or_hand_written_bad_input_gets_a_server_error(live: LiveService) -> None:
    pytest.importorskip("schemathesis", reason="pip install -e '.[reliability]'")
    live.client.post("/v1/users/fuzz-user/memories", json={"content": "User plays the oboe"})
    cases = env_int("RELIABILITY_FUZZ_CASES", 60)
    report = run_fuzz(
        live.base_url,
        live.api_key,
        max_cases=cases,
        max_time_s=env_int("RELIABILITY_FUZZ_TIME_S", 90),
    )
    record_figures("api_fuzz", report.as_dict())
    assert live.client.get("/readyz").status_code == 200
    assert report.generated >= min(cases, 30)
    assert report.server_errors == []
    assert report.transport_errors == 0
