"""`DeprecationWarning` fails a test when the project's own code causes it (pyproject.toml's
`filterwarnings`), and stays a dependency's business otherwise."""

from __future__ import annotations

import warnings

import pytest


def _deprecation_from(module: str) -> None:
    warnings.warn_explicit(
        "this call is deprecated", DeprecationWarning, filename="x.py", lineno=1, module=module
    )


@pytest.mark.parametrize(
    "module",
    [
        "service.flows.context",
        "tests.integration.test_api",
        "bench.replay_locomo",
        "testkit.llm_stub",
        # the filter files run as Open WebUI loads them: a fresh module per load
        # (testkit/filter_loader.py, bench/chat_harness.py)
        "function_memory_filter_3",
        "memory_commands",
    ],
)
def test_a_deprecation_in_the_projects_own_code_is_an_error(module: str) -> None:
    with pytest.raises(DeprecationWarning, match="this call is deprecated"):
        _deprecation_from(module)


@pytest.mark.parametrize("module", ["httpx._client", "sqlalchemy.orm.session", "services"])
def test_a_deprecation_in_a_dependency_is_left_to_it(module: str) -> None:
    with warnings.catch_warnings(record=True) as seen:
        _deprecation_from(module)
    assert seen == []
