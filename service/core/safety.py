"""Write-time and read-time guards: instruction-like text and secrets (DESIGN §5.5)."""

from __future__ import annotations

import re

_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(instructions?|rules|prompts?|guidelines)\b"
    r"|\b(system prompt|developer message|jailbreak)\b"
    r"|\byou (are|must) now\b|\bfrom now on,? (you|the assistant)\b"
    r"|\b(always|never) (answer|respond|reply|say)\b[^.\n]{0,60}\b(assistant|you)\b",
    re.IGNORECASE,
)

_SECRET_PATTERNS = (
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{16,}\b"),  # API keys of common LLM vendors
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),  # GitHub tokens
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\b"),  # JWTs
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\b(?:\d[ -]?){13,19}\b"),  # card-like digit runs
    re.compile(
        r"\b(password|passwd|passcode|pin|pin code|secret|api key|token|otp|cvv|iban)"
        r"(\s+(is|was|=|:))\s*\S+",
        re.IGNORECASE,
    ),
)

REDACTED = "[redacted]"


def looks_like_instruction(text: str) -> bool:
    """True when `text` reads as an instruction to the assistant rather than a fact."""
    return bool(_INSTRUCTION.search(text))


def redact_secrets(text: str) -> str:
    """Replace credentials, keys, card numbers and codes by "[redacted]"."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(_redaction_for, text)
    return text


def _redaction_for(match: re.Match[str]) -> str:
    # Keep the label of "password is X" so the memory still says what was withheld.
    if match.lastindex and match.group(1) and match.lastindex >= 2:
        return f"{match.group(1)}{match.group(2)} {REDACTED}"
    return REDACTED


def contains_secret(text: str) -> bool:
    """True when `text` holds something `redact_secrets` would hide."""
    return redact_secrets(text) != text
