"""Write-time and read-time guards: instruction-like text and secrets (DESIGN §5.5).

The one entry point the flows use; the rules live in `service/core/redaction.py` (secrets)
and `service/core/instructions.py` (orders to the assistant).
"""

from __future__ import annotations

from service.core import instructions, neutralise, redaction

REDACTED = "[redacted]"
"""The placeholder of a secret of no particular kind (`redact_secrets` names the kind:
"[redacted password]", "[redacted key]", …)."""

redact_secrets = redaction.redact
mostly_redacted = redaction.mostly_redacted


INERT_OPEN, INERT_CLOSE = "(", ")"  # what "<", ">" and their look-alikes become
inert = neutralise.inert
"""`text` made safe to place inside the injected block (DESIGN §6.3): one line, no tag or
tag look-alike, no bidi control, no fetchable URL, no role prefix (`core/neutralise.py`)."""


def looks_like_instruction(text: str) -> bool:
    """True when `text` reads as an instruction to the assistant rather than a fact
    (`service/core/instructions.py`)."""
    return instructions.is_instruction(text)
