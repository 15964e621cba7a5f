"""create_app(settings): the ASGI app, with everything built in its lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import Depends, FastAPI

from service import __version__, bootstrap, observability
from service.api import errors
from service.api.deps import require_key
from service.api.routes import admin, chat, health, memories, reminders
from service.config import Settings
from service.embeddings.encoder import Encoder
from service.flows.turns import requeue_waiting_turns
from service.jobs import owner_indexes as owner_index_jobs
from service.jobs import reembed as reembed_jobs
from service.jobs import supervision
from service.jobs.app import run_workers

log = logging.getLogger(__name__)

DESCRIPTION = """Long-term memory for Open WebUI. The filter calls `POST /v1/context` in its
inlet and `POST /v1/turns` in its outlet; users' memories are managed under
`/v1/users/{user_id}/memories`. Every `/v1` call needs `Authorization: Bearer <MEMORY_API_KEY>`."""


def create_app(settings: Settings, *, encoder: Encoder | None = None) -> FastAPI:
    """The service as an ASGI app.

    Nothing connects or loads at call time: the lifespan starts PostgreSQL (embedded unless
    DATABASE_URL is set), applies migrations, loads the embedding model (unless `encoder` is
    given, as tests do to share one), opens the job queue and starts the in-process workers.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        observability.configure_logging(settings.log_format)
        async with bootstrap.database_url(settings) as url:
            await bootstrap.migrate_database(url)
            async with (
                bootstrap.open_runtime(settings, url=url, encoder=encoder) as runtime,
                runtime.jobs.open_async(),
            ):
                await requeue_waiting_turns(runtime)
                reembedding = await reembed_jobs.start(runtime, run_workers=settings.run_workers)
                indexing = owner_index_jobs.start(runtime) if settings.run_workers else None
                workers: asyncio.Task[None] | None = None
                if settings.run_workers:
                    workers = asyncio.create_task(
                        run_workers(runtime, concurrency=settings.worker_concurrency),
                        name="workers",
                    )
                app.state.runtime = runtime
                try:
                    yield
                finally:
                    app.state.runtime = None
                    await supervision.cancel(reembedding)
                    await supervision.cancel(indexing)
                    if workers is not None:
                        workers.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await workers

    app = FastAPI(
        title="Memory service for Open WebUI",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.api_key = settings.bearer_key()
    app.state.runtime = None
    errors.install(app)
    app.add_middleware(observability.MetricsMiddleware)
    app.include_router(health.router)
    app.include_router(chat.router, dependencies=[Depends(require_key)])
    app.include_router(memories.router, dependencies=[Depends(require_key)])
    app.include_router(memories.chats, dependencies=[Depends(require_key)])
    app.include_router(reminders.router, dependencies=[Depends(require_key)])
    app.include_router(admin.router, dependencies=[Depends(require_key)])
    app.include_router(admin.metrics_router, dependencies=[Depends(require_key)])
    return app
