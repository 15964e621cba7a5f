"""Write-time and read-time guards: instruction-like text and secrets (DESIGN §5.5).

The one entry point the flows use; the rules live in `service/core/redaction.py` (secrets)
and `service/core/instructions.py` (orders to the assistant).
"""

from __future__ import annotations

from functools import lru_cache

from service.core import instructions, neutralise, planted, redaction

REDACTED = "[redacted]"
"""The placeholder of a secret of no particular kind (`redact_secrets` names the kind:
"[redacted password]", "[redacted key]", …)."""

redact_secrets = redaction.redact
redact_conversation = redaction.redact_conversation
mostly_redacted = redaction.mostly_redacted


INERT_OPEN, INERT_CLOSE = "(", ")"  # what "<", ">" and their look-alikes become
inert = neutralise.inert
"""`text` made safe to place inside the injected block (DESIGN §6.3): one line, no tag or
tag look-alike, no bidi control, no fetchable URL, no role prefix (`core/neutralise.py`)."""


@lru_cache(maxsize=16384)
def looks_like_instruction(text: str) -> bool:
    """True when `text` reads as an instruction to the assistant rather than a fact: an
    order overriding its rules (`service/core/instructions.py`) or a harmful act the rules
    of `service/core/planted.py` name. Pure and cheap (no embedding), so the read path and
    every writer use it; writers add the semantic check (`flows/planted_check.py`). Cached:
    the read path asks it of the same memories turn after turn (~0.7 ms a new text).
    """
    return instructions.is_instruction(text) or bool(planted.rule_reasons(text))
