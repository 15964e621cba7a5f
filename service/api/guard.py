"""The bearer key and the body-size limit, checked before any request body is read.

FastAPI reads and parses a JSON body before it runs a route's dependencies, so a key check
in a dependency alone lets anyone make the service hold a body of any size in memory. This
ASGI middleware answers first:

- 401 for a `/v1` request without the right key, the body never read;
- 413 for a body larger than `max_body_bytes` (`MEMORY_MAX_BODY_BYTES`): at once when the
  `Content-Length` says so, else as soon as the streamed body passes the limit.

Paths outside `/v1` (`/healthz`, `/readyz`, `/docs`, `/openapi.json`) need no key; the
size limit applies to every path.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING

from fastapi import HTTPException

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

KEYED_PREFIX = "/v1"
"""Paths under this prefix need the bearer key (the same rule as the routers' dependency)."""


class BodyTooLarge(HTTPException):
    """The streamed body passed the limit; raised out of `receive` to stop the route.

    An HTTPException, so that FastAPI, which turns other errors of body reading into a 400,
    answers it as the 413 it is.
    """

    def __init__(self, max_body_bytes: int) -> None:
        super().__init__(status_code=413, detail=too_large(max_body_bytes))


class RequestGuard:
    """ASGI middleware: key first, then a bounded body.

    Args:
        app: the wrapped application.
        api_key: the expected bearer key.
        max_body_bytes: the largest request body accepted, in bytes.
    """

    def __init__(self, app: ASGIApp, *, api_key: str, max_body_bytes: int) -> None:
        self.app = app
        self._expected = f"bearer {api_key}".encode()
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401 without the key on keyed paths and 413 past `max_body_bytes`, else pass on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        if str(scope.get("path", "")).startswith(KEYED_PREFIX) and not self._authorized(
            headers.get(b"authorization", b"")
        ):
            await _answer(send, 401, "missing or wrong API key", {"WWW-Authenticate": "Bearer"})
            return
        declared = _content_length(headers.get(b"content-length"))
        if declared is not None and declared > self.max_body_bytes:
            await _answer(send, 413, too_large(self.max_body_bytes))
            return
        received = 0
        started = False

        async def bounded_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, tracking_send)
        except BodyTooLarge as exc:
            if not started:
                await _answer(send, 413, str(exc.detail))

    def _authorized(self, header: bytes) -> bool:
        # "Bearer" is case-insensitive (RFC 6750 §2.1); the key itself is compared exactly.
        scheme, _, key = header.partition(b" ")
        given = scheme.lower() + b" " + key.strip()
        return secrets.compare_digest(given, self._expected)


def too_large(max_body_bytes: int) -> str:
    """The sentence of a 413 answer."""
    return (
        f"The request body is larger than the {max_body_bytes} bytes the service accepts "
        "(MEMORY_MAX_BODY_BYTES)."
    )


def _content_length(value: bytes | None) -> int | None:
    """The declared body size, or None when absent or not a number."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


async def _answer(
    send: Send, status: int, detail: str, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps({"detail": detail}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
