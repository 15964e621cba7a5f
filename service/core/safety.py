"""Write-time and read-time guards: instruction-like text and secrets (DESIGN §5.5).

The one entry point the flows use; the rules live in `service/core/redaction.py` (secrets)
and `service/core/instructions.py` (orders to the assistant).
"""

from __future__ import annotations

import re

from service.core import instructions, redaction

REDACTED = "[redacted]"
"""The placeholder of a secret of no particular kind (`redact_secrets` names the kind:
"[redacted password]", "[redacted key]", …)."""

redact_secrets = redaction.redact
redact_conversation = redaction.redact_conversation
mostly_redacted = redaction.mostly_redacted


# "<", ">", their look-alikes and entities could close `<userMemories>` or open a tag of
# their own; single angle quotation marks read the same to a person and are no markup.
INERT_OPEN, INERT_CLOSE = "\u2039", "\u203a"  # what "<" and ">" become
_OPENING = re.compile(r"[<\uff1c\ufe64\u2329]|&lt;?|&#0*60;?|&#x0*3c;?", re.IGNORECASE)
_CLOSING = re.compile(r"[>\uff1e\ufe65\u232a]|&gt;?|&#0*62;?|&#x0*3e;?", re.IGNORECASE)


def inert(text: str) -> str:
    """`text` made safe to place inside the injected block (DESIGN §6.3): on one line (a
    memory cannot start a header or a "SYSTEM:" line of its own) and without angle brackets
    (it cannot close `<userMemories>` or open another tag)."""
    flat = " ".join(text.split())
    return _CLOSING.sub(INERT_CLOSE, _OPENING.sub(INERT_OPEN, flat))


def looks_like_instruction(text: str) -> bool:
    """True when `text` reads as an instruction to the assistant rather than a fact
    (`service/core/instructions.py`)."""
    return instructions.is_instruction(text)
