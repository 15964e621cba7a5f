"""Request dependencies: the runtime and the bearer-key check."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.flows.runtime import Runtime

_bearer = HTTPBearer(auto_error=False, description="MEMORY_API_KEY of the service")


def get_runtime(request: Request) -> Runtime:
    """The runtime the app's lifespan built; 503 while the service is still starting."""
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is None:
        raise HTTPException(status_code=503, detail="the service is still starting")
    return runtime


def has_key(request: Request) -> bool:
    """True when the request carries the service's bearer key (constant-time compare)."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    expected: str = request.app.state.api_key
    return scheme.lower() == "bearer" and secrets.compare_digest(
        given.strip().encode(), expected.encode()
    )


def require_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """401 unless the request carries the service's bearer key (constant-time compare)."""
    expected: str = request.app.state.api_key
    given = credentials.credentials if credentials else ""
    if not secrets.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            status_code=401,
            detail="missing or wrong API key",
            headers={"WWW-Authenticate": "Bearer"},
        )


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
