"""Fixtures of the reliability tests: the LLM stand-in and a live service using it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.embeddings.encoder import Encoder
from testkit.extraction_replies import echo_fact
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    """The LLM stand-in, echoing each message's `fact-…` token as a memory."""
    with LLMStub(responder=echo_fact) as stub:
        yield stub


@pytest.fixture
def live(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    """The service with the LLM stand-in configured."""
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")


@pytest.fixture
def state_dir(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Path:
    """A MEMORY_STATE_DIR holding the ONNX export the suite already made (no second export)."""
    del encoder  # requested so that the export exists
    exported = next(tmp_path_factory.getbasetemp().glob("models*/*.onnx"))
    (tmp_path / "state" / "models").mkdir(parents=True)
    shutil.copy(exported, tmp_path / "state" / "models" / exported.name)
    return tmp_path / "state"
