"""When a chat's waiting turns are extracted together: thresholds, lookback, "remember that …".

Extraction runs once per *batch* of turns, not once per turn: one LLM call reads several new
user messages of one sender in one chat. A batch is due when the sender's waiting turns in the
chat reach `max_tokens` estimated tokens or `max_messages` user messages (whichever comes
first), when the user explicitly asks to have something remembered, or when the chat goes
quiet. The newest `lookback_turns` turns are left out while the chat is active, because they
may still change (regenerated, edited). Thresholds, lookback and the token estimate with a
safety margin follow the founding per-discussion memory guide (seeds/000, "Memory
Generation Triggering Logic": chunkEstimatedTokenSize 1000, maxMessagesBetweenChunks 5,
lookbackStartTurn, rough_estimate_token_length times 1.10).

Batches never mix senders or chat contexts: the caller gives one sender's turns of one chat,
and a change of the chat's context (moved into a folder, shared) closes the batch, so the
privacy rules of one batch are those of every turn in it (DESIGN §3).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from service.core.tokens import estimate_tokens

__all__ = [
    "TOKEN_SAFETY_MARGIN",
    "BatchPolicy",
    "PendingTurn",
    "asks_to_remember",
    "message_hash",
    "plan_batches",
    "turn_tokens",
]

TOKEN_SAFETY_MARGIN = 1.10
"""Factor on the token estimate that decides a batch (seeds/000, safety_margin 1.10)."""

# Imperative requests in the languages the filter meets most; a false positive only makes
# one extraction run earlier, so the patterns lean towards matching.
_REMEMBER = re.compile(
    r"(?:^|[.!?;:\n]\s*|\b(?:please|pls|can you|could you|would you|will you)\s+)"
    r"(?:remember|memori[sz]e|don't forget|do not forget|never forget|keep in mind|"
    r"make a note|take note|note down)\b"
    r"|\bsave (?:this|that|it) (?:to|in|into) (?:your )?memory\b"
    r"|\b(?:merke? dir|merken sie sich|vergiss nicht|vergessen sie nicht)\b"
    r"|(?:souviens-toi|souvenez-vous|rappelle-toi|retiens bien|n'oublie pas)\b"
    r"|\b(?:recuerda que|recuerde que|acuérdate|no olvides)\b"
    r"|\b(?:ricorda che|ricordati|non dimenticare)\b"
    r"|(?:lembre-se|lembra-te|não esqueça|não se esqueça)\b",
    re.IGNORECASE,
)


def asks_to_remember(text: str) -> bool:
    """True when the message explicitly asks to remember something ("remember that …").

    Matches imperative forms ("Remember that …", "please remember", "don't forget",
    "keep in mind", "save this to memory") and their German, French, Spanish, Italian and
    Portuguese equivalents; a question like "do you remember that film?" does not match.
    """
    normalized = unicodedata.normalize("NFC", text).replace("\u2019", "'").strip()
    return _REMEMBER.search(normalized) is not None


def turn_tokens(user_message: str, assistant_message: str | None) -> int:
    """Estimated tokens a turn adds to an extraction prompt (user message and reply).

    Returns:
        `estimate_tokens` of both texts with `TOKEN_SAFETY_MARGIN`; errs high.
    """
    text = user_message if not assistant_message else f"{user_message}\n{assistant_message}"
    return estimate_tokens(text, safety_margin=TOKEN_SAFETY_MARGIN)


def _canonical(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def message_hash(
    *, chat_id: str, user_id: str, user_message: str, history: Sequence[tuple[str, str]]
) -> str:
    """The identity of a user message within its chat, independent of message ids.

    SHA-256 over the chat, the sender, the (role, text) messages before it that the filter
    sent and the message itself, each NFC-normalized with whitespace collapsed. The same
    message handed over again — a repeated outlet, a replay, a reply regenerated under
    another id — has the same hash; the same words later in the chat do not, because the
    messages before them differ. Callers pass texts already redacted of secrets, so the
    hash never fingerprints a credential.

    Returns:
        64 lowercase hex characters.
    """
    parts = [
        chat_id,
        user_id,
        *(f"{role}:{_canonical(text)}" for role, text in history),
        f"user:{_canonical(user_message)}",
    ]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    """The thresholds of one deployment (Settings → MEMORY_BATCH_*)."""

    max_tokens: int = 1000  #: estimated tokens that make a batch due (seeds/000)
    max_messages: int = 5  #: user messages that make a batch due (seeds/000); 1 = per turn
    lookback_turns: int = 0  #: newest turns left out while the chat is active


@dataclass(frozen=True, slots=True)
class PendingTurn:
    """A waiting turn as the batching decision sees it."""

    turn_id: int  #: ledger id; ascending = order of arrival
    tokens: int  #: `turn_tokens` of its texts
    remember: bool  #: the user asked to remember something
    context: str  #: fingerprint of its chat context; a change closes the batch


def plan_batches(
    pending: Sequence[PendingTurn], policy: BatchPolicy, *, quiet: bool
) -> list[tuple[int, ...]]:
    """The batches due now among one sender's waiting turns in one chat.

    Turns are taken oldest first. A batch closes when it reaches `max_messages` turns or
    `max_tokens` estimated tokens, or before a turn with another chat context; every
    closed batch is due. While the chat is active (`quiet` False) the newest
    `lookback_turns` turns are held back and an unfinished last batch waits — unless a turn
    asks to remember something, which makes everything up to it due at once. When the chat
    is quiet every waiting turn is due.

    Args:
        pending: the waiting turns of one sender in one chat, in any order.
        policy: the thresholds.
        quiet: the chat has gone quiet (or the turns must be extracted now).

    Returns:
        Batches of turn ids, oldest first; [] when nothing is due.
    """
    turns = sorted(pending, key=lambda t: t.turn_id)
    if quiet:
        eligible = len(turns)
    else:
        eligible = max(len(turns) - policy.lookback_turns, 0)
        asked = [i for i, t in enumerate(turns) if t.remember]
        if asked:
            eligible = max(eligible, asked[-1] + 1)
    considered = turns[:eligible]
    forced_through = (
        len(considered)
        if quiet
        else (max((i + 1 for i, t in enumerate(considered) if t.remember), default=0))
    )

    batches: list[tuple[int, ...]] = []
    current: list[PendingTurn] = []
    tokens = 0
    for index, turn in enumerate(considered):
        if current and turn.context != current[0].context:
            batches.append(tuple(t.turn_id for t in current))  # closed by the context change
            current, tokens = [], 0
        current.append(turn)
        tokens += turn.tokens
        if len(current) >= policy.max_messages or tokens >= policy.max_tokens:
            batches.append(tuple(t.turn_id for t in current))
            current, tokens = [], 0
        elif index + 1 == forced_through:
            batches.append(tuple(t.turn_id for t in current))
            current, tokens = [], 0
    return batches


@dataclass(frozen=True, slots=True)
class BranchTurn:
    """Where a turn sits in its chat: the message before it, its text and its history."""

    turn_id: int
    user_message: str
    history: Sequence[tuple[str, str]]  #: (role, text) before it, oldest first (≤ 6)
    parent: str | None = None  #: id of the message before it; "" opens the chat; None unknown


def replaced_turns(new: BranchTurn, waiting: Sequence[BranchTurn]) -> list[int]:
    """Waiting turns of one sender in one chat that the chat's branch no longer holds.

    An older waiting turn with the same parent message (both known) but another text is the
    message before an edit (Open WebUI keeps both as siblings and shows the new one); a
    later waiting turn whose history quotes that old text followed it on the abandoned
    branch. Neither may be learned from. Turns whose parent is unknown (API clients that
    send none) are never taken for edits. Texts are compared NFC-normalized with whitespace
    collapsed, as for `message_hash`.

    Returns:
        Their turn ids, ascending.
    """
    if new.parent is None:
        return []
    new_text = _canonical(new.user_message)
    gone: set[int] = set()
    for turn in waiting:
        if turn.turn_id == new.turn_id or turn.turn_id in gone or turn.parent != new.parent:
            continue
        if _canonical(turn.user_message) == new_text:
            continue
        gone.add(turn.turn_id)
        said = ("user", _canonical(turn.user_message))
        gone.update(
            later.turn_id
            for later in waiting
            if later.turn_id > turn.turn_id
            and later.turn_id != new.turn_id
            and later.parent is not None
            and said in [(role, _canonical(text)) for role, text in later.history]
        )
    return sorted(gone)
