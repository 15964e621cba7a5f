"""OpenAI-compatible chat completions over httpx, with JSON repair of the answer."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import httpx
import json_repair

from service.core import redaction
from service.errors import ExtractionOutputInvalid, LLMNotConfigured, LLMUnavailable
from service.llm import structured

log = logging.getLogger(__name__)

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def decode_json_answer(text: str, *, max_chars: int | None = None) -> Any:
    """Decode the JSON object in an LLM answer.

    Strips reasoning blocks (`<think>…</think>`), code fences and text around the first
    `{`…last `}`, then parses with json-repair.

    Args:
        max_chars: longest answer json-repair may work on (core/limits.MAX_ANSWER_CHARS);
            a longer one is read by the standard JSON parser only. None = no bound.

    Raises:
        ExtractionOutputInvalid: when no JSON object or array can be recovered.
    """
    if max_chars is not None and len(text or "") > max_chars:
        return _decode_large(text, max_chars=max_chars)
    cleaned = _THINK.sub("", text or "").strip()
    fence = _FENCE.search(cleaned)
    if fence:
        cleaned = fence.group(1).strip()
    start, end = cleaned.find("{"), cleaned.rfind("}")
    if start == -1 and not cleaned.startswith("["):
        raise ExtractionOutputInvalid("the answer contains no JSON object")
    if start != -1:
        if end < start or _unbalanced(cleaned[start : end + 1]):
            # A cut-off answer would be "repaired" into cut-off facts: ask again instead.
            raise ExtractionOutputInvalid("the answer is truncated")
        cleaned = cleaned[start : end + 1]
    try:
        data = json_repair.loads(cleaned)
    except Exception as exc:
        raise ExtractionOutputInvalid(f"the answer is not repairable JSON: {exc}") from exc
    if not isinstance(data, dict | list):
        raise ExtractionOutputInvalid("the answer is not a JSON object")
    return data


def _decode_large(text: str, *, max_chars: int) -> Any:
    """An answer past `max_chars`: the JSON between its first `{` or `[` and its last `}` or
    `]` when that is valid JSON (fences and prose around it aside), else refused; never
    repaired, so it costs linear time.
    """
    log.warning("LLM answer of %d characters, past %d: no repair attempted", len(text), max_chars)
    starts = [i for i in (text.find("{"), text.find("[")) if i != -1]
    end = max(text.rfind("}"), text.rfind("]"))
    try:
        if not starts or end < min(starts):
            raise ValueError("no JSON value")
        data = json.loads(text[min(starts) : end + 1])
    except ValueError as exc:
        raise ExtractionOutputInvalid(
            f"the answer holds {len(text)} characters, more than the {max_chars} a repair "
            "is tried on, and is not valid JSON"
        ) from exc
    if not isinstance(data, dict | list):
        raise ExtractionOutputInvalid("the answer is not a JSON object")
    return data


def _unbalanced(text: str) -> bool:
    """True when braces or brackets outside strings do not close (a truncated answer)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return depth != 0 or in_string


class LLMClient:
    """Chat completions against one OpenAI-compatible endpoint."""

    def __init__(
        self,
        *,
        base_url: str | None,
        model: str | None,
        api_key: str | None,
        timeout_s: float = 60.0,
        json_mode: bool = True,
        max_answer_tokens: int | None = None,
        structured_output: str = "auto",
    ) -> None:
        self.base_url = base_url.rstrip("/") if base_url else None
        self.model = model
        self.json_mode = json_mode
        #: the ceiling of every call's max_tokens (None: the caller's value stands)
        self.max_answer_tokens = max_answer_tokens
        self.formats = structured.FormatLadder(structured_output if json_mode else "off")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(timeout=timeout_s, headers=headers)

    @property
    def configured(self) -> bool:
        """True when both an LLM base URL and a model are set."""
        return bool(self.base_url and self.model)

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        json_answer: bool = False,
        temperature: float = 0.0,
        max_tokens: int = 1_500,
        schema: dict[str, Any] | None = None,
    ) -> str:
        """The assistant text for `messages` (each content redacted of secrets first).

        With `json_answer`, the answer is asked for as JSON in the best structured-output
        mode the endpoint accepts (`service/llm/structured.py`): with `schema` (a JSON
        schema of the answer object) first as `json_schema`, then as llama.cpp's
        `json_object` + `schema`, then plain `json_object`, then no `response_format`; a
        4xx naming the format moves this client down the ladder for good.

        Raises:
            LLMNotConfigured: without base URL or model.
            LLMUnavailable: on connection errors, timeouts, non-2xx answers or odd bodies.
        """
        if not self.configured:
            raise LLMNotConfigured()
        # The last door to the LLM: whatever a caller forgot, no credential goes out.
        messages = [{**m, "content": redaction.redact(m.get("content") or "")} for m in messages]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": False,
            "temperature": temperature,
            "max_tokens": min(max_tokens, self.max_answer_tokens or max_tokens),
        }
        response = await self._post_structured(body, json_answer=json_answer, schema=schema)
        if response.status_code >= 400:
            raise LLMUnavailable(
                f"the LLM answered HTTP {response.status_code}: {response.text[:200]}"
            )
        try:
            message = response.json()["choices"][0]["message"]
            content = message.get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMUnavailable("the LLM answer is not a chat completion") from exc
        if isinstance(content, list):  # some servers answer content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content)

    async def _post_structured(
        self, body: dict[str, Any], *, json_answer: bool, schema: dict[str, Any] | None
    ) -> httpx.Response:
        """POST `body` with the response format of the ladder's current mode; on a 4xx
        that rejects the format, step down and send again (at most once per mode).
        """
        while True:
            mode = self.formats.mode_for(json_answer=json_answer, schema=schema)
            response_format = structured.response_format(mode, schema)
            if response_format is None:
                body.pop("response_format", None)
            else:
                body["response_format"] = response_format
            response = await self._post(body)
            if not self.formats.step_down(mode, response.status_code, response.text):
                return response

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        url = f"{self.base_url}/chat/completions"
        try:
            return await self._http.post(url, json=body)
        except httpx.HTTPError as exc:
            raise LLMUnavailable(f"the LLM at {self.base_url} is unreachable: {exc!r}") from exc

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._http.aclose()
