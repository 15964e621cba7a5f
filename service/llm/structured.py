"""Structured-output modes of OpenAI-compatible endpoints, and which one an endpoint takes.

Endpoints differ in how they constrain an answer to JSON:

- `json_schema`: `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`
  (OpenAI, vLLM, Ollama, llama.cpp's own server);
- `schema_object`: `{"type": "json_object", "schema": {...}}` (llama-cpp-python's server:
  grammar-constrained decoding, the answer matches the schema);
- `json_object`: `{"type": "json_object"}` (any valid JSON object);
- `off`: no `response_format` (the prompt alone asks for JSON; the parser copes).

In `auto`, a client starts at the strongest mode and steps down, for good, when the endpoint
answers 400 or 422 with an error that names the format (or 500 naming `response_format`:
llama-cpp-python's server answers its validation error so) (a server that does not know a mode
says so; one that ignores it answers normally and stays there). Each rejected mode is
remembered on its own, so an endpoint that takes schemas but not plain `json_object` keeps
getting schemas. A fixed mode never steps.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

log = logging.getLogger(__name__)

Mode = Literal["json_schema", "schema_object", "json_object", "off"]
MODES: tuple[Mode, ...] = ("json_schema", "schema_object", "json_object", "off")
"""Strongest first: the order `auto` tries them in."""
SETTINGS = ("auto", *MODES)
"""Values of LLM_STRUCTURED_OUTPUT."""

_FORMAT_WORDS = ("response_format", "json_schema", "schema", "grammar", "json_object", "format")
"""Words of an error body that blame the format (OpenAI: "Invalid parameter:
'response_format'…", llama-cpp-python: a 422 pydantic error on `response_format.type`,
vLLM: "…guided decoding…json_schema…")."""


def response_format(mode: Mode, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The `response_format` body field of `mode` (None: send none).

    Raises:
        ValueError: a schema mode without a schema.
    """
    if mode == "off":
        return None
    if mode == "json_object":
        return {"type": "json_object"}
    if schema is None:
        raise ValueError(f"mode {mode} needs a schema")
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema, "strict": False},
        }
    return {"type": "json_object", "schema": schema}


class FormatLadder:
    """The structured-output modes one endpoint takes, learnt from the ones it rejects."""

    def __init__(self, setting: str = "auto") -> None:
        """Args:
        setting: one of `SETTINGS`.

        Raises:
            ValueError: another value.
        """
        if setting not in SETTINGS:
            raise ValueError(f"structured output must be one of {', '.join(SETTINGS)}")
        self.auto = setting == "auto"
        self._fixed: Mode | None = None if self.auto else setting  # type: ignore[assignment]
        self.rejected: set[Mode] = set()

    def mode_for(self, *, json_answer: bool, schema: dict[str, Any] | None) -> Mode:
        """The mode of the next request: `off` for a text answer; else the strongest mode
        not rejected yet that the request can use (the schema modes need a schema).
        """
        if not json_answer:
            return "off"
        if self._fixed is not None:
            if schema is None and self._fixed in ("json_schema", "schema_object"):
                return "json_object"
            return self._fixed
        usable = MODES if schema is not None else MODES[MODES.index("json_object") :]
        return next(m for m in usable if m == "off" or m not in self.rejected)

    def step_down(self, mode: Mode, status: int, body: str) -> bool:
        """After an answer to a request sent in `mode`: True when the endpoint rejected the
        format, which is then never sent again (send the request again); False otherwise.
        """
        if not self.auto or mode == "off":
            return False
        lowered = body.lower()
        if status in (400, 422):
            if not any(word in lowered for word in _FORMAT_WORDS):
                return False
        elif status != 500 or "response_format" not in lowered:
            # llama-cpp-python 0.3.36 answers its validation error on response_format.type
            # with a 500 (seen 2026-12-04); any other 500 is the server's own failure
            return False
        if mode not in self.rejected:
            log.warning(
                "the LLM endpoint rejected response_format %s (%s); not asking for it again",
                mode,
                body[:120].replace("\n", " "),
            )
            self.rejected.add(mode)
        return True
