"""create_app(settings): the ASGI app, with everything built in its lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import __version__, observability
from service.api import errors
from service.api.deps import require_key
from service.api.routes import admin, chat, health, memories, reminders
from service.config import Settings
from service.embeddings.encoder import Encoder
from service.flows.runtime import Runtime
from service.flows.turns import requeue_waiting_turns
from service.jobs import owner_indexes as owner_index_jobs
from service.jobs import reembed as reembed_jobs
from service.jobs import supervision
from service.jobs.app import build_job_app, run_workers
from service.llm.client import LLMClient
from service.storage import migrate
from service.storage.db import Database, libpq_url, start_embedded

log = logging.getLogger(__name__)

#: Header on every answer naming the service and its version; the filter tells "wrong key"
#: (our 401) from "wrong address" (someone else's 401 or 404) and spots incompatible versions.
SERVICE_HEADER = "X-Memory-Service"

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
        server: Any = None
        url = settings.database_url
        if not url:
            url, server = await asyncio.to_thread(start_embedded, settings.state_dir)
        await asyncio.to_thread(migrate.upgrade, url)
        db = Database.connect(url, server_settings=settings.server_settings())
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
        jobs = build_job_app(libpq_url(url), max_attempts=settings.extraction_max_attempts)
        workers: asyncio.Task[None] | None = None
        async with jobs.open_async():
            runtime = Runtime(settings=settings, db=db, encoder=enc, llm=llm, jobs=jobs)
            await requeue_waiting_turns(runtime)
            reembedding = await reembed_jobs.start(runtime, run_workers=settings.run_workers)
            indexing = owner_index_jobs.start(runtime) if settings.run_workers else None
            if settings.run_workers:
                workers = asyncio.create_task(
                    run_workers(runtime, concurrency=settings.worker_concurrency), name="workers"
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
                await llm.aclose()
                await db.dispose()
                if own_encoder:
                    enc.close()
        if server is not None:
            server.cleanup()

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
    app.add_middleware(_VersionHeader)
    app.include_router(health.router)
    app.include_router(chat.router, dependencies=[Depends(require_key)])
    app.include_router(memories.router, dependencies=[Depends(require_key)])
    app.include_router(memories.chats, dependencies=[Depends(require_key)])
    app.include_router(reminders.router, dependencies=[Depends(require_key)])
    app.include_router(admin.router, dependencies=[Depends(require_key)])
    app.include_router(admin.metrics_router, dependencies=[Depends(require_key)])
    return app


class _VersionHeader:
    """ASGI middleware: SERVICE_HEADER on every HTTP answer, errors included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append(SERVICE_HEADER, __version__)
            await send(message)

        await self.app(scope, receive, send_with_header)
