"""Errors → HTTP answers, in one place; every answer has a sentence in `detail`."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.errors import (
    DatabaseUnavailable,
    EditConflict,
    InvalidInput,
    MemoryNotFound,
    MemoryServiceError,
    ScopeDenied,
)

log = logging.getLogger(__name__)

# first match wins: EditConflict is an InvalidInput (commands show both as a sentence)
_STATUS = {
    MemoryNotFound: 404,
    ScopeDenied: 403,
    EditConflict: 409,
    InvalidInput: 400,
    DatabaseUnavailable: 503,
}


def _where(loc: tuple[object, ...]) -> str:
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or "request"


def install(app: FastAPI) -> None:
    """Register the exception handlers on `app`."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        sentences = [
            f"{_where(tuple(e.get('loc', ())))}: {e.get('msg', 'invalid')}" for e in errors[:5]
        ]
        return JSONResponse(status_code=422, content={"detail": "; ".join(sentences)})

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404 and exc.detail == "Not Found":
            # no route matched: most often a client's base URL that ends in /v1 already
            return JSONResponse(
                status_code=404,
                content={
                    "detail": f"the memory service has no {request.url.path}: its routes "
                    "start with /v1 right after its address (http://host:port/v1/…), so a "
                    "client's base URL ends in the port"
                },
            )
        return await http_exception_handler(request, exc)

    @app.exception_handler(MemoryServiceError)
    async def _domain(_: Request, exc: MemoryServiceError) -> JSONResponse:
        status = next((code for kind, code in _STATUS.items() if isinstance(exc, kind)), 500)
        if status >= 500:
            log.error("request failed: %s", exc)
        return JSONResponse(status_code=status, content={"detail": str(exc)})
