"""One process's Runtime, built from Settings: the database (embedded unless DATABASE_URL),
migrations, the embedding encoder, the LLM client and the job queue.

Used by the API's lifespan and by the `worker` command, so both processes are built alike.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from service.config import Settings
from service.embeddings.encoder import Encoder
from service.flows.runtime import Runtime
from service.jobs.app import build_job_app
from service.llm.client import LLMClient
from service.storage import migrate
from service.storage.db import Database, libpq_url, start_embedded

__all__ = ["open_runtime"]


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings, *, encoder: Encoder | None = None
) -> AsyncIterator[Runtime]:
    """Build the Runtime, yield it, and close everything it opened.

    Args:
        encoder: an encoder to share (tests); None loads the one the settings name.

    Raises:
        ConfigurationError: a missing model or an unusable setting.
    """
    server: Any = None
    url = settings.database_url
    if not url:
        url, server = await asyncio.to_thread(start_embedded, settings.state_dir)
    # LISTEN, session advisory locks, CREATE INDEX CONCURRENTLY and migrations need a direct
    # connection; a pooler in transaction mode keeps none of them (docs/scaling.md)
    direct = settings.listen_database_url or url
    pooled = settings.database_pooler == "transaction"
    try:
        await asyncio.to_thread(migrate.upgrade, direct)
        db = Database.connect(
            url,
            pool_size=settings.db_pool_size,
            # a pooler does not pass libpq options on: queries then set what they need
            # per transaction (storage.memories)
            server_settings={} if pooled else settings.server_settings(),
        )
        own_encoder = encoder is None
        enc = encoder or await asyncio.to_thread(
            Encoder,
            settings.embedding_model_path,
            threads=settings.embedding_threads,
            backend=settings.embedding_backend,
            onnx_dir=settings.state_dir / "models",
        )
        llm = LLMClient(
            base_url=settings.llm_base_url,
            model=settings.llm_model,
            api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
            timeout_s=settings.llm_timeout_s,
            json_mode=settings.llm_json_mode,
        )
        jobs = build_job_app(
            libpq_url(url),
            max_attempts=settings.extraction_max_attempts,
            pool_size=settings.jobs_pool_size,
            pooled=pooled,
        )
        try:
            async with jobs.open_async():
                yield Runtime(
                    settings=settings,
                    db=db,
                    encoder=enc,
                    llm=llm,
                    jobs=jobs,
                    direct_url=libpq_url(direct),
                )
        finally:
            await llm.aclose()
            await db.dispose()
            if own_encoder:
                enc.close()
    finally:
        if server is not None:
            server.cleanup()
