"""The evaluation's own calls to the answer and judge models: OpenAI-compatible chat
completions over httpx, retried with backoff on rate limits, server errors and timeouts.

Only the configured base URL is ever contacted (`trust_env=False`: no proxy variables, no
netrc). Tokens come from the endpoint's `usage`; an endpoint without `usage` is counted with
the service's estimate (`service.core.tokens.estimate_tokens`) and flagged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from service.core.tokens import estimate_tokens

__all__ = [
    "RETRY_STATUSES",
    "ChatClient",
    "Completion",
    "Endpoint",
    "EndpointFailed",
    "endpoint_kind",
    "public_url",
]

#: HTTP statuses worth another try: rate limited, and the server's own transient failures.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: The longest wait a server's `Retry-After` may impose on one retry (seconds).
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True)
class Endpoint:
    """One OpenAI-compatible endpoint and how patiently to call it.

    Args:
        base_url: ends in `/v1` (or Open WebUI's `/api`); `/chat/completions` is appended.
        model: the model id sent in each request.
        api_key: sent as `Authorization: Bearer …` when set; never written to any file.
        timeout_s: seconds one call may take.
        attempts: tries per call (first one included).
        backoff_s: wait before the second try; doubles after each further failure.
        json_mode: send `response_format={"type": "json_object"}` (judge calls only).
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    attempts: int = 4
    backoff_s: float = 2.0
    json_mode: bool = False

    def describe(self) -> dict[str, Any]:
        """What the results file names: kind, host, model, settings (never the key)."""
        return {
            "kind": endpoint_kind(self.base_url),
            "base_url": public_url(self.base_url),
            "model": self.model,
            "timeout_s": self.timeout_s,
            "attempts": self.attempts,
            "json_mode": self.json_mode,
        }


def public_url(base_url: str) -> str:
    """The URL without user, password and query (where a key may hide), for the results."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def endpoint_kind(base_url: str) -> str:
    """Where the model runs, named in the results: "local" (loopback, private hosts) or "hosted"."""
    host = (urlsplit(base_url).hostname or "").lower()
    private = (
        host in ("localhost", "::1")
        or host.startswith(("127.", "10.", "192.168."))
        or host.endswith((".local", ".internal", ".lan"))
        or (host.startswith("172.") and host.split(".")[1:2] and 16 <= int(host.split(".")[1]) < 32)
    )
    return "local" if private else "hosted"


class EndpointFailed(RuntimeError):
    """Every try of one call failed; `reason` is the last failure ("timeout", "http 503", …)."""

    def __init__(self, reason: str, failures: list[str]) -> None:
        super().__init__(f"{reason} after {len(failures)} tries")
        self.reason = reason
        self.attempts = len(failures)
        self.failures = failures  #: the reason of each failed try, in order


@dataclass
class Completion:
    """One answered call."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int  #: tries it took (1 = no retry)
    seconds: float  #: wall time including waits between tries
    usage_reported: bool  #: False when the tokens are estimates
    failures: list[str] = field(default_factory=list)  #: reasons of the failed tries before


Sleep = Callable[[float], Awaitable[None]]


class ChatClient:
    """Chat completions against one `Endpoint`, with retries.

    Counts across calls: `calls`, `retries`, `timeouts`, `http_errors` (by status),
    `failed_calls`.
    """

    def __init__(self, endpoint: Endpoint, *, sleep: Sleep = asyncio.sleep) -> None:
        self.endpoint = endpoint
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        self._http = httpx.AsyncClient(timeout=endpoint.timeout_s, headers=headers, trust_env=False)
        self._sleep = sleep
        self.calls = 0
        self.retries = 0
        self.timeouts = 0
        self.failed_calls = 0
        self.http_errors: dict[str, int] = {}

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def complete(
        self, messages: list[dict[str, str]], *, max_tokens: int = 200
    ) -> Completion:
        """The reply to `messages` at temperature 0.

        Raises:
            EndpointFailed: when every try timed out, failed to connect or answered a status in
                `RETRY_STATUSES`, or at once on any other 4xx (a wrong model name or key does
                not get better by asking again) or on a body that is not a chat completion.
        """
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "stream": False,
            "temperature": 0.0,
            "max_tokens": max_tokens,
        }
        if self.endpoint.json_mode:
            body["response_format"] = {"type": "json_object"}
        url = f"{self.endpoint.base_url.rstrip('/')}/chat/completions"
        self.calls += 1
        started = time.monotonic()
        reason = "no try"
        failures: list[str] = []
        for attempt in range(1, self.endpoint.attempts + 1):
            wait = self.endpoint.backoff_s * 2 ** (attempt - 1)
            try:
                response = await self._http.post(url, json=body)
            except httpx.TimeoutException:
                self.timeouts += 1
                reason = "timeout"
            except httpx.HTTPError as exc:
                reason = f"connection error {type(exc).__name__}"
            else:
                if response.status_code < 400:
                    return self._completion(response, messages, attempt, started, failures)
                reason = f"http {response.status_code}"
                self.http_errors[reason] = self.http_errors.get(reason, 0) + 1
                if response.status_code not in RETRY_STATUSES:
                    failures.append(reason)
                    break
                wait = max(wait, _retry_after_s(response))
            failures.append(reason)
            if attempt < self.endpoint.attempts:
                self.retries += 1
                await self._sleep(wait)
        self.failed_calls += 1
        raise EndpointFailed(reason, failures)

    def _completion(
        self,
        response: httpx.Response,
        messages: list[dict[str, str]],
        attempt: int,
        started: float,
        failures: list[str],
    ) -> Completion:
        try:
            payload = response.json()
            content = payload["choices"][0]["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            self.failed_calls += 1
            raise EndpointFailed(
                "not a chat completion", [*failures, "not a chat completion"]
            ) from None
        if isinstance(content, list):  # some servers answer content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        text = str(content)
        usage = payload.get("usage") if isinstance(payload, dict) else None
        reported = isinstance(usage, dict) and "prompt_tokens" in usage
        if reported:
            prompt = int(usage.get("prompt_tokens") or 0)  # type: ignore[union-attr]
            completion = int(usage.get("completion_tokens") or 0)  # type: ignore[union-attr]
        else:
            prompt = sum(estimate_tokens(m["content"]) for m in messages)
            completion = estimate_tokens(text)
        return Completion(
            text=text,
            prompt_tokens=prompt,
            completion_tokens=completion,
            attempts=attempt,
            seconds=time.monotonic() - started,
            usage_reported=reported,
            failures=failures,
        )

    def counts(self) -> dict[str, Any]:
        """The client's counters, for the results."""
        return {
            "calls": self.calls,
            "retries": self.retries,
            "timeouts": self.timeouts,
            "http_errors": dict(self.http_errors),
            "failed_calls": self.failed_calls,
        }


def _retry_after_s(response: httpx.Response) -> float:
    """A numeric `Retry-After` header in seconds (capped), else 0."""
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(response.headers.get("retry-after", ""))))
    except ValueError:
        return 0.0
