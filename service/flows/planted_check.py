"""The planted-instruction check on the write path (issue 27 item 2; policy in
`core/planted.py`).

Extraction, `/memory add` and the HTTP API, imports, the Remember action, reminders, the
profile and chat summaries (these two per sentence) ask `verdicts` before a text is stored:
one embedding per candidate (the encoder's cache serves the same
text again when the flow stores it) against the shipped labelled examples, and — only for a
text the rules and the margin leave in doubt, and only when an LLM is configured and
`MEMORY_LLM_PLANTED_CHECK` is on (the default) — one short LLM call. A refused text is never
stored, so the read path has nothing to embed.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence

import numpy as np

from service.core import planted
from service.embeddings.encoder import Encoder
from service.errors import LLMNotConfigured, LLMUnavailable
from service.flows.runtime import Runtime

log = logging.getLogger(__name__)

_example_vectors: dict[int, tuple[np.ndarray, np.ndarray]] = {}
_lock = asyncio.Lock()


async def _examples_for(encoder: Encoder) -> tuple[np.ndarray, np.ndarray]:
    """The labelled examples' vectors under `encoder` (harmful, legitimate), embedded once
    per encoder: ~230 short texts, a second or two on one thread.
    """
    key = id(encoder)
    cached = _example_vectors.get(key)
    if cached is not None:
        return cached
    async with _lock:
        cached = _example_vectors.get(key)
        if cached is None:
            ex = planted.examples()
            # the bulk lane: ~450 texts must not hold other users' inlet embeddings back
            vectors = await encoder.encode([*ex.harmful, *ex.legitimate], bulk=True)
            cached = (vectors[: len(ex.harmful)], vectors[len(ex.harmful) :])
            _example_vectors[key] = cached
    return cached


async def warm(rt: Runtime) -> None:
    """Embed the labelled examples now (at start-up, before `/readyz` says ready), so the
    first write of a user does not pay for them (a few seconds on a busy machine).
    """
    await _examples_for(rt.encoder)


async def verdicts(rt: Runtime, texts: Sequence[str]) -> list[planted.Verdict]:
    """One verdict per text (same order). Never raises for an LLM failure: a text in doubt
    whose LLM verdict could not be had keeps the rules' and the margin's verdict.
    """
    if not texts:
        return []
    harmful, legitimate = await _examples_for(rt.encoder)
    vectors = await rt.encoder.encode(list(texts))
    out = [
        planted.judge(
            text,
            planted.semantic_margin(v, harmful, legitimate),
            planted.nearest_harmful(v, harmful),
        )
        for text, v in zip(texts, vectors, strict=True)
    ]
    if rt.llm.configured and rt.settings.llm_planted_check:
        for i, verdict in enumerate(out):
            if verdict.in_doubt and await _llm_says_harmful(rt, texts[i]):
                out[i] = planted.Verdict(True, ("llm",), verdict.margin, in_doubt=False)
    return out


async def refused(rt: Runtime, text: str) -> bool:
    """True when `text` must not be stored (`verdicts`)."""
    return (await verdicts(rt, [text]))[0].refused


async def _llm_says_harmful(rt: Runtime, text: str) -> bool:
    try:
        answer = await rt.llm.complete(
            [{"role": "user", "content": planted.LLM_PROMPT + text}], max_tokens=5
        )
    except (LLMNotConfigured, LLMUnavailable) as exc:
        log.warning("planted-instruction check: no LLM verdict (%s); rules and margin decide", exc)
        return False
    return planted.llm_says_harmful(answer) is True


_SENTENCE_END = re.compile("(?<=[.!?\u3002\uff01\uff1f])\\s+|\n+")


async def refuses_any_sentence(rt: Runtime, text: str) -> bool:
    """True when one sentence of a longer LLM-written text (a profile, a chat summary) is a
    planted instruction (`verdicts` of each sentence: the labelled examples are sentences).
    """
    sentences = [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
    return any(v.refused for v in await verdicts(rt, sentences))
