"""create_app(settings): the ASGI app, with everything built in its lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import Depends, FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import __version__, bootstrap, observability
from service.api import errors
from service.api.deps import require_key
from service.api.guard import RequestGuard
from service.api.routes import (
    admin,
    chat,
    health,
    imports,
    memories,
    remember,
    reminders,
    tools,
)
from service.config import Settings
from service.embeddings.encoder import Encoder
from service.flows import warmup
from service.jobs import background, worker_process

log = logging.getLogger(__name__)

#: Header on every answer naming the service and its version; the filter tells "wrong key"
#: (our 401) from "wrong address" (someone else's 401 or 404) and spots incompatible versions.
SERVICE_HEADER = "X-Memory-Service"

DESCRIPTION = """Long-term memory for Open WebUI. The filter calls `POST /v1/context` in its
inlet and `POST /v1/turns` in its outlet; users' memories are managed under
`/v1/users/{user_id}/memories`. Every `/v1` call needs `Authorization: Bearer <MEMORY_API_KEY>`."""


def create_app(settings: Settings, *, encoder: Encoder | None = None) -> FastAPI:
    """The service as an ASGI app.

    Nothing connects or loads at call time: the lifespan builds the Runtime
    (`bootstrap.open_service`: PostgreSQL, embedded unless DATABASE_URL is set, migrations, the
    embedding model unless `encoder` is given, as tests do to share one, the job queue) and
    starts the job workers unless MEMORY_RUN_WORKERS=false: in this process (`jobs.background`),
    or with MEMORY_WORKER_PROCESS in a child `worker` process (`jobs.worker_process`), then
    warms the read path (`flows.warmup`): /readyz answers ready once that is done.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        observability.configure_logging(settings.log_format)
        separate = settings.run_workers and settings.worker_process
        async with (
            bootstrap.open_service(settings, encoder=encoder) as runtime,
            background.running(runtime, workers=settings.run_workers and not separate),
            # started once the database is up and migrated, stopped before it closes
            worker_process.supervised(settings, enabled=separate) as child,
        ):
            app.state.worker_process = child
            app.state.runtime = runtime
            # /healthz answers at once; /readyz once the read path ran (flows/warmup.py)
            warming = asyncio.create_task(warmup.run(runtime), name="warm-up")
            try:
                yield
            finally:
                warming.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await warming
                app.state.runtime = None

    app = FastAPI(
        title="Memory service for Open WebUI",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.api_key = settings.bearer_key()
    app.state.runtime = None
    app.state.worker_process = None
    app.state.workers = (
        ("worker process" if settings.worker_process else "in-process")
        if settings.run_workers
        else "not here (MEMORY_RUN_WORKERS=false)"
    )
    errors.install(app)
    app.add_middleware(observability.MetricsMiddleware)
    # Added after the metrics, so it runs before them: no body is read before the key and its
    # size are checked.
    app.add_middleware(
        RequestGuard, api_key=app.state.api_key, max_body_bytes=settings.max_body_bytes
    )
    # Outermost: every answer, the guard's 401 and 413 included, names the service, so the
    # filter tells a wrong key from a wrong address.
    app.add_middleware(_VersionHeader)
    app.include_router(health.router)
    app.include_router(chat.router, dependencies=[Depends(require_key)])
    app.include_router(memories.router, dependencies=[Depends(require_key)])
    app.include_router(imports.router, dependencies=[Depends(require_key)])
    app.include_router(imports.chat_router, dependencies=[Depends(require_key)])
    app.include_router(memories.chats, dependencies=[Depends(require_key)])
    app.include_router(reminders.router, dependencies=[Depends(require_key)])
    app.include_router(remember.router, dependencies=[Depends(require_key)])
    app.include_router(tools.router, dependencies=[Depends(require_key)])
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
