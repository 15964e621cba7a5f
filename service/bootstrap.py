"""The one way to build the service's parts from `Settings`: the app's lifespan, every CLI
command and the tests all start here, so a setting (the embedding backend, the database's
server settings, the LLM's JSON mode, …) means the same wherever the service runs.

An entry-point module: it may import every layer below the entry points (flows, storage,
embeddings, llm, jobs' app factory); nothing below imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from service.config import Settings
from service.embeddings.encoder import Encoder
from service.errors import MemoryServiceError
from service.flows.ids import install_short_id_key
from service.flows.runtime import Runtime
from service.jobs.app import build_job_app, retry_policy_of
from service.jobs.queue import ProcrastinateQueue
from service.llm.client import LLMClient
from service.storage import backend_priority, hybrid_search, migrate
from service.storage.db import Database, libpq_url, start_embedded


def build_encoder(settings: Settings) -> Encoder:
    """The embedding model of the settings (EMBEDDING_MODEL_PATH, EMBEDDING_BACKEND,
    EMBEDDING_THREADS), its ONNX export kept in MEMORY_MODEL_CACHE_DIR (else the user's cache
    folder), shared by the installation's processes. Blocking: loads the
    model (seconds; the first start also exports it to ONNX) — call it in a thread.
    """
    return Encoder(
        settings.embedding_model_path,
        threads=settings.embedding_threads,
        backend=settings.embedding_backend,
        onnx_dir=settings.model_cache_dir,
    )


def build_llm(settings: Settings) -> LLMClient:
    """The OpenAI-compatible client of the settings (LLM_BASE_URL, LLM_MODEL, LLM_API_KEY,
    LLM_TIMEOUT_S, LLM_JSON_MODE, LLM_STRUCTURED_OUTPUT). Close it with `aclose()`.
    """
    return LLMClient(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        timeout_s=settings.llm_timeout_s,
        json_mode=settings.llm_json_mode,
        max_answer_tokens=settings.llm_max_answer_tokens,
        structured_output=settings.llm_structured_output,
    )


@contextlib.asynccontextmanager
async def database_url(settings: Settings) -> AsyncIterator[str]:
    """DATABASE_URL, or else the embedded PostgreSQL in MEMORY_STATE_DIR/pgdata, started
    here and stopped on exit (when this process started it).

    Raises:
        DatabaseUnavailable: the embedded server is missing or did not start.
    """
    if settings.database_url:
        yield settings.database_url
        return
    url, server = await asyncio.to_thread(start_embedded, settings.state_dir)
    try:
        yield url
    finally:
        server.cleanup()


def server_settings(settings: Settings) -> dict[str, str]:
    """PostgreSQL settings every pooled connection starts with (storage.db.create_engine).

    hnsw.ef_search is the value the read path's HNSW scans use, so they need no SET.
    """
    ef_search = hybrid_search.hnsw_ef_search(settings.ann_ef_search, settings.candidate_limit)
    return {"hnsw.ef_search": str(ef_search)}


def build_runtime(
    settings: Settings, *, url: str, encoder: Encoder, pool_size: int | None = None
) -> Runtime:
    """A Runtime on the database at `url`: connection pool with the read path's server
    settings, `encoder`, the LLM client and the job app (built, not opened:
    `async with rt.jobs.open_async()`). Close it with `close_runtime`.

    Behind a pooler in transaction mode (MEMORY_DATABASE_POOLER=transaction) connections
    start with no libpq options (queries set what they need per transaction) and the job
    queue uses no prepared statements; what needs a session goes to `direct_url`
    (MEMORY_LISTEN_DATABASE_URL, else `url`).

    Args:
        pool_size: connections of the pool; None = MEMORY_DB_POOL_SIZE.
    """
    pooled = settings.database_pooler == "transaction"
    return Runtime(
        settings=settings,
        db=Database.connect(
            url,
            pool_size=settings.db_pool_size if pool_size is None else pool_size,
            server_settings={} if pooled else server_settings(settings),
        ),
        encoder=encoder,
        llm=build_llm(settings),
        jobs=ProcrastinateQueue(
            build_job_app(
                libpq_url(url),
                retry_policy=retry_policy_of(settings),
                pool_size=settings.jobs_pool_size,
                pooled=pooled,
            )
        ),
        direct_url=libpq_url(direct_url(settings, url)),
    )


def direct_url(settings: Settings, url: str) -> str:
    """The URL for what a pooler in transaction mode cannot carry: LISTEN, session advisory
    locks, CREATE INDEX CONCURRENTLY, migrations (MEMORY_LISTEN_DATABASE_URL, else `url`).
    """
    return settings.listen_database_url or url


async def close_runtime(rt: Runtime) -> None:
    """Close what `build_runtime` opened (the encoder stays with whoever built it)."""
    await rt.llm.aclose()
    await rt.db.dispose()


async def migrate_database(url: str) -> None:
    """Apply every migration not yet applied to the database at `url` (in a thread)."""
    await asyncio.to_thread(migrate.upgrade, url)


async def migrate_to(url: str, revision: str) -> tuple[str, str | None]:
    """Migrate the database at `url` up or down to `revision` (storage/migrate.py
    `migrate_to`, in a thread): what was done and the revision it is at now.
    """
    done = await asyncio.to_thread(migrate.migrate_to, url, revision)
    return done, await asyncio.to_thread(migrate.current_revision, url)


async def is_at_head(url: str) -> bool:
    """Tell whether the database at `url` is at the newest migration (read in a thread)."""
    return await asyncio.to_thread(migrate.is_at_head, url)


def head_revision() -> str | None:
    """The newest migration's revision id."""
    return migrate.head_revision()


async def require_head(url: str) -> None:
    """For commands that use the database without migrating it.

    Raises:
        MemoryServiceError: the database at `url` is behind the newest migration.
    """
    if not await is_at_head(url):
        raise MemoryServiceError(
            "the database is not at the newest migration; run "
            "`python -m service migrate` (or start the service) first"
        )


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    url: str,
    encoder: Encoder | None = None,
    pool_size: int | None = None,
) -> AsyncIterator[Runtime]:
    """`build_runtime` for a `with` block, with `encoder` or else one built from the
    settings (loaded in a thread, closed on exit).
    """
    if encoder is None:
        enc, own = await asyncio.to_thread(build_encoder, settings), True
    else:
        enc, own = encoder, False
    try:
        rt = build_runtime(settings, url=url, encoder=enc, pool_size=pool_size)
        try:
            yield rt
        finally:
            await close_runtime(rt)
    finally:
        if own:
            enc.close()


@contextlib.asynccontextmanager
async def open_service(
    settings: Settings, *, encoder: Encoder | None = None, background: bool = False
) -> AsyncIterator[Runtime]:
    """Everything a service process (`serve` or `worker`) needs: the database (DATABASE_URL or
    the embedded one), migrations applied, the Runtime built and its job queue open.

    Args:
        background: a `worker` process: on the embedded PostgreSQL the server processes of its
            connections are scheduled MEMORY_WORKER_NICE lower (storage/backend_priority.py).

    Raises:
        DatabaseUnavailable, ConfigurationError: the database or the model cannot be had.
    """
    async with database_url(settings) as url:
        await migrate_database(direct_url(settings, url))
        async with open_runtime(settings, url=url, encoder=encoder) as runtime:
            if background and settings.database_url is None:
                # only the embedded server of this installation (its checks: the module)
                backend_priority.lower_backends(
                    runtime.db.engine, pgdata=settings.state_dir / "pgdata", by=settings.worker_nice
                )
            async with runtime.jobs.open_async():
                # the installation's key of the short ids, the same in every process
                await install_short_id_key(runtime.db)
                yield runtime
