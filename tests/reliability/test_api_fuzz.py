"""API fuzz run over the OpenAPI schema (schemathesis): no request may get a 5xx.

Two causes of 500 are known and have a fix waiting outside this suite's files: a NUL
character in any text that reaches PostgreSQL (which cannot store it), and a page offset
beyond PostgreSQL's bigint. Database errors of that kind (`DataError`) should become a 400
where sessions are committed (`storage/db.py`, `unit_of_work`). Until then the test reports
those two as an expected failure; any other server error fails it.
"""

from __future__ import annotations

import re

import pytest

from bench.fuzz_api import run_fuzz
from testkit.live_service import LiveService
from tests.reliability.support import env_int, record_figures

_HUGE_OFFSET = re.compile(r"'offset': '?\d{19,}")


def _known_cause(error: dict[str, object]) -> bool:
    sent = str(error.get("sent", ""))
    return "\\x00" in sent or "\\u0000" in sent or bool(_HUGE_OFFSET.search(sent))


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
    unknown = [e for e in report.server_errors if not _known_cause(e)]
    assert unknown == []
    assert report.transport_errors == 0
    if report.server_errors:
        pytest.xfail(
            f"{len(report.server_errors)} server errors from NUL characters or a "
            "bigint offset (DataError not turned into 400 yet)"
        )
