"""Service Runtimes built in-process for tests that call flows directly (no HTTP, no workers)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from service.config import Settings
from service.embeddings.encoder import Encoder
from service.flows.runtime import Runtime
from service.jobs.app import build_job_app
from service.llm.client import LLMClient
from service.storage.db import Database

RuntimeFactory = Callable[..., Runtime]
"""`build(**env)`: a Runtime with those settings (values are stringified)."""


@asynccontextmanager
async def runtime_factory(
    database_url: str, encoder: Encoder, state_dir: Path, **defaults: Any
) -> AsyncIterator[RuntimeFactory]:
    """Build Runtimes as the app does (pool with the read path's server settings, LLM client
    from the settings, job app), closing them all on exit.

    Args:
        defaults: settings every Runtime gets (by alias, e.g. LLM_BASE_URL); `build(**env)`
            adds or overrides.
    """
    built: list[Runtime] = []

    def build(**env: Any) -> Runtime:
        values = {
            "DATABASE_URL": database_url,
            "MEMORY_STATE_DIR": str(state_dir),
            **{k: str(v) for k, v in (defaults | env).items()},
        }
        settings = Settings(**values)
        rt = Runtime(
            settings=settings,
            db=Database.connect(
                database_url, pool_size=2, server_settings=settings.server_settings()
            ),
            encoder=encoder,
            llm=LLMClient(
                base_url=settings.llm_base_url,
                model=settings.llm_model,
                api_key=None,
                # 10 s unless a test sets LLM_TIMEOUT_S (race tests hold calls open longer)
                timeout_s=settings.llm_timeout_s if "LLM_TIMEOUT_S" in values else 10,
            ),
            jobs=build_job_app(database_url),
        )
        built.append(rt)
        return rt

    try:
        yield build
    finally:
        for rt in built:
            await rt.llm.aclose()
            await rt.db.dispose()
