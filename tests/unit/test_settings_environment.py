"""`Settings.environment()`: what `serve` hands its worker process reads back as the same
settings (jobs/worker_process.py), secrets, paths, booleans and unset values included."""

from __future__ import annotations

from pathlib import Path

from service.config import Settings


def test_settings_read_back_from_their_environment_are_the_same() -> None:
    given = Settings(
        MEMORY_STATE_DIR=Path("/srv/memory"),
        MEMORY_API_KEY="s3cret-key",
        LLM_API_KEY="llm-key",
        MEMORY_RUN_WORKERS=True,
        MEMORY_WORKER_PROCESS=True,
        MEMORY_WORKER_NICE=3,
        DATABASE_URL="postgresql://u:p@db:5432/memory",
    )
    env = given.environment()
    assert env["MEMORY_API_KEY"] == "s3cret-key"  # the value, never pydantic's "**********"
    assert env["MEMORY_WORKER_PROCESS"] == "true"
    assert "MEMORY_LISTEN_DATABASE_URL" not in env  # unset stays unset
    assert Settings(**env) == given


def test_the_default_settings_read_back_the_same() -> None:
    assert Settings(**Settings().environment()) == Settings()
