"""Liveness, readiness and service status."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from service.api.deps import RuntimeDep, has_key, require_key
from service.api.schemas import StatusRead
from service.flows import status as status_flow

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])

DATABASE_DOWN = (
    "The database is not reachable; the service log has the reason (or ask again with the API key)."
)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """200 while the process runs."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """200 when the database, its migrations and the embedding model are ready, the read
    path has run once (flows/warmup.py: the first turn is served like any other) and, with
    MEMORY_WORKER_PROCESS, the worker process has started once; else 503. The body's
    `workers` says where the job workers run and whether the worker process is up now.
    """
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is None:
        return JSONResponse(status_code=503, content={"status": "starting"})
    if not runtime.warm:
        return JSONResponse(status_code=503, content={"status": "warming up"})
    child = getattr(request.app.state, "worker_process", None)
    if child is not None and not child.ever_up:
        # ready means turns get extracted too: not before the worker process first ran
        return JSONResponse(
            status_code=503,
            content={"status": "starting the worker process", "workers": "starting"},
        )
    body: dict[str, Any] = {
        "status": "ready",
        "embedding_model": runtime.encoder.model_name,
        "llm": "configured" if runtime.llm.configured else "not configured",
        "workers": workers_state(request),
    }
    try:
        await runtime.db.ping()
    except Exception as exc:
        # The driver's text names host, port and user: only the log and key holders see it.
        log.warning("readiness: %s", exc)
        content = {"status": "database unavailable", "detail": DATABASE_DOWN}
        if has_key(request):
            content["detail"] = str(exc)
        return JSONResponse(status_code=503, content=content)
    return JSONResponse(status_code=200, content=body)


def workers_state(request: Request) -> str:
    """Where this process's job workers run: "in-process", "worker process up (pid N)",
    "worker process down: …" (it is being started again), or "not here (…)".
    """
    child = getattr(request.app.state, "worker_process", None)
    if child is not None:
        return f"worker process {child.state}"
    return str(getattr(request.app.state, "workers", "in-process"))


@router.get("/v1/status", response_model=StatusRead, dependencies=[Depends(require_key)])
async def get_status(rt: RuntimeDep) -> StatusRead:
    """Queue depth, failures and whether extraction can run (and if not, why)."""
    return StatusRead(**await status_flow.service_status(rt))
