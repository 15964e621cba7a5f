"""pyproject's filterwarnings: a DeprecationWarning raised from the project's own code fails
the test; one from a dependency is that dependency's to fix and is ignored."""

from __future__ import annotations

import warnings

import pytest


def test_a_deprecation_in_the_service_fails_the_test() -> None:
    with pytest.raises(DeprecationWarning):
        warnings.warn_explicit("old API", DeprecationWarning, "x.py", 1, module="service.x")


def test_a_deprecation_in_a_dependency_is_ignored() -> None:
    with warnings.catch_warnings(record=True) as seen:  # the suite's filters, recorded
        warnings.warn_explicit("old API", DeprecationWarning, "y.py", 1, module="sqlalchemy.y")
    assert seen == []  # ignored, not recorded (other warnings raise under "error")
