"""Token estimates without a tokenizer download (no tiktoken files at run time)."""

from __future__ import annotations

import math
import re

_WORD = re.compile(r"\S+")


def estimate_tokens(text: str, *, safety_margin: float = 1.0) -> int:
    """Estimate the tokens `text` costs a typical chat model; errs high.

    The larger of 1.35 tokens per whitespace word and 1 token per 3.5 characters — BPE
    vocabularies average about 4 characters or 0.75 words per English token, so both
    estimates sit above the usual count, and the character estimate catches scripts
    without spaces. Both rates are those of the founding per-discussion memory guide
    (seeds/000, "rough_estimate_token_length").

    Args:
        text: any text.
        safety_margin: factor applied to the larger estimate (seeds/000 uses 1.10 when the
            estimate decides when to spend an LLM call); 1.0 = none.

    Returns:
        A non-negative integer number of tokens.
    """
    if not text:
        return 0
    words = len(_WORD.findall(text))
    return math.ceil(max(words * 1.35, len(text) / 3.5) * safety_margin)
