"""A test that needs a data set outside the repository skips in a plain clone, and fails
where MEMORY_TESTS_REQUIRE_DATA=1 says the data must be there (CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.data_sets import REQUIRE_DATA, require


def test_a_missing_data_set_skips_with_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REQUIRE_DATA, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"the corpus is not at .*: run make fetch"):
        require(tmp_path / "absent.json", name="the corpus", how="run make fetch")


def test_a_missing_data_set_fails_where_it_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REQUIRE_DATA, "1")
    with pytest.raises(pytest.fail.Exception, match="MEMORY_TESTS_REQUIRE_DATA=1"):
        require(tmp_path / "absent.json", name="the corpus", how="run make fetch")


def test_a_present_data_set_is_handed_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_DATA, "1")
    found = tmp_path / "here.json"
    found.write_text("[]")
    assert require(found, name="the corpus", how="run make fetch") == found
