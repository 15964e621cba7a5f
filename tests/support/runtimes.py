"""Service Runtimes built in-process for tests that call flows directly (no HTTP, no workers)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from service import bootstrap
from service.config import Settings
from service.embeddings.encoder import Encoder
from service.flows.runtime import Runtime

RuntimeFactory = Callable[..., Runtime]
"""`build(**env)`: a Runtime with those settings (values are stringified)."""


@asynccontextmanager
async def runtime_factory(
    database_url: str, encoder: Encoder, state_dir: Path, **defaults: Any
) -> AsyncIterator[RuntimeFactory]:
    """Build Runtimes as the app does (service/bootstrap.build_runtime), with a two-connection
    pool and the suite's shared encoder, closing them all on exit.

    Args:
        defaults: settings every Runtime gets (by alias, e.g. LLM_BASE_URL); `build(**env)`
            adds or overrides.
    """
    built: list[Runtime] = []

    def build(**env: Any) -> Runtime:
        values = {
            "DATABASE_URL": database_url,
            "MEMORY_STATE_DIR": str(state_dir),
            # 10 s unless a test sets it (race tests hold calls open longer)
            "LLM_TIMEOUT_S": "10",
            # scripted answers are not what the scripted messages say (tests/conftest.py)
            "MEMORY_EXTRACTION_SUPPORT_CHECK": "false",
            **{k: str(v) for k, v in (defaults | env).items()},
        }
        rt = bootstrap.build_runtime(
            Settings(**values), url=database_url, encoder=encoder, pool_size=2
        )
        built.append(rt)
        return rt

    try:
        yield build
    finally:
        for rt in built:
            await bootstrap.close_runtime(rt)
