"""What one turn injects: the profile and the items under one token budget, no fact twice.

The block of a turn (DESIGN §6.3) has up to three parts — the core profile (or, without one,
the core memories) inside `<userMemories>`, and the query-relevant items under "I recall…".
They share the turn's budget (issue 15 item 3): the profile keeps its leading sentences that
fit `PROFILE_SHARE` of the budget, the items fill the rest, and core memories take what the
items leave, at most `CORE_SHARE`. A fact is never injected twice: an item whose words the
kept profile already holds, or whose text repeats an earlier item or core memory, is left
out, and its tokens go to the next item.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from service.core.ranking import render_item
from service.core.records import Memory, RankedMemory
from service.core.tokens import estimate_tokens

PROFILE_SHARE = 0.5
"""Most of the budget the profile may take; the rest is for the items (a ≤200-word profile
costs about 270 tokens, more than half of the default 400)."""
CORE_SHARE = 1 / 3
"""Most of the budget core memories may take (DESIGN §6.1, seeds/001)."""
COVERED_SHARE = 0.75
"""An item is in the profile when at least this share of its content words is there: the
profile is the LLM's rewording, so "User owns a beagle named Pepper" comes back as "Pat owns
a beagle called Pepper" (3 of 4 words)."""

_WORD = re.compile(r"\w+")
# words that say nothing about which fact a line holds (the profile's subject is the user),
# in English and the commonest of Spanish, German, French, Italian and Portuguese
_FILLER = frozenset(
    """
a an the and or but of at by for with about to from in on into is are was were be been being
am do does did has have had it its this that these those their they them he she his her him
i me my we our you your user users who which what when where also very not no
el la los las lo en de del y es un una que por con para al usuario usuaria
der die das den dem und ist im in mit von zu ein eine einen nutzer nutzerin
le les et est du des une au aux utilisateur utilisatrice
il gli di da che utente e è o os as do da em um uma utilizador
""".split()
)
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


@dataclass(frozen=True, slots=True)
class Block:
    """The parts of one turn's block, each within its share of the budget."""

    profile: str | None  #: the profile's kept sentences, None without a profile
    core: list[RankedMemory]  #: core memories injected (only without a profile)
    items: list[RankedMemory]  #: query-relevant items, best first
    dropped_repeats: int  #: items left out because the block already held their fact


@functools.lru_cache(maxsize=8_192)
def content_words(text: str) -> frozenset[str]:
    """Lower-cased, accent-folded words of `text` without filler words ("the", "user"…).

    Cached (8,192 texts): every turn compares the same memories' texts again.
    """
    folded = text.casefold()
    # ASCII has nothing to decompose or fold: the per-character pass is for other scripts
    plain = (
        folded
        if folded.isascii()
        else "".join(
            c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c)
        )
    )
    # one Latin letter is a clitic ("user's" → "s"), never a fact
    return frozenset(
        w
        for w in _WORD.findall(plain)
        if w not in _FILLER and not (len(w) == 1 and w.isascii() and w.isalpha())
    )


def covered_by(content: str, held: frozenset[str]) -> bool:
    """True when `held` (words already in the block) has ≥ COVERED_SHARE of `content`'s
    content words; a line without content words is never covered.
    """
    words = content_words(content)
    if not words:
        return False
    return len(words & held) >= COVERED_SHARE * len(words)


def fit_profile(profile: str | None, *, budget_tokens: int) -> str | None:
    """The profile's leading sentences that fit `budget_tokens` (None when none fits).

    Whole sentences in order, so what is kept still reads as prose; a first sentence longer
    than the whole budget is cut at a word and ends with "…".
    """
    if not profile or not profile.strip() or budget_tokens <= 0:
        return None
    kept: list[str] = []
    for sentence in _SENTENCE_END.split(profile.strip()):
        if estimate_tokens(" ".join([*kept, sentence])) > budget_tokens:
            break
        kept.append(sentence)
    if kept:
        return " ".join(kept)
    words: list[str] = []
    for word in profile.split():
        if estimate_tokens(" ".join([*words, word]) + "…") > budget_tokens:
            break
        words.append(word)
    return " ".join(words) + "…" if words else None


def _fact_key(memory: Memory) -> str:
    """Memories with the same content words hold the same fact, whatever their case or order."""
    return " ".join(sorted(content_words(memory.content))) or memory.content.strip()


def compose(
    *,
    profile: str | None,
    core: Sequence[Memory],
    relevant: Sequence[RankedMemory],
    budget_tokens: int,
    max_items: int,
    today: date | None = None,
) -> Block:
    """Share `budget_tokens` between the profile, the relevant items and core memories.

    In this order: the profile's leading sentences (at most PROFILE_SHARE of the budget),
    then the relevant items best first, then — without a profile — core memories in what
    the items left (at most CORE_SHARE). Core memories come last because they ignore the
    message: put first, they cost 5 points of the evidence inside a 400-token block on
    LoCoMo conversations 0–4 (docs/performance.md), yet with few relevant items (a new
    user, a message like "Suggest a dinner") they still fill the block.

    Args:
        profile: the chat's core profile text, if one was written (then `core` is unused:
            the profile is written from those memories).
        core: core memories, most confident then most recent first.
        relevant: ranked items, best first (already gated).
        budget_tokens: tokens the profile text and the rendered item lines may cost together
            (the block's fixed frame — tags, header, data note — is not counted).
        max_items: most items, core memories included.
        today: the user's current date: a line's cost includes its mark of a past event.

    Returns:
        The parts; together they cost at most `budget_tokens`.
    """
    budget = max(budget_tokens, 0)
    kept_profile = fit_profile(profile, budget_tokens=int(budget * PROFILE_SHARE))
    spent = estimate_tokens(kept_profile or "")
    held = content_words(kept_profile or "")
    seen: set[str] = set()
    taken: set[object] = set()
    dropped = 0

    def repeats(memory: Memory) -> bool:
        return _fact_key(memory) in seen or covered_by(memory.content, held)

    items: list[RankedMemory] = []
    for item in relevant:
        if len(items) >= max_items:
            break
        if item.memory.id in taken:
            continue
        if repeats(item.memory):
            dropped += 1
            continue
        cost = estimate_tokens(render_item(item, today=today))
        if spent + cost > budget:
            continue
        items.append(item)
        spent += cost
        taken.add(item.memory.id)
        seen.add(_fact_key(item.memory))
    core_items: list[RankedMemory] = []
    if kept_profile is None:
        room = min(budget - spent, int(budget * CORE_SHARE))
        for memory in core:
            if len(items) + len(core_items) >= max_items:
                break
            if memory.id in taken or repeats(memory):
                continue
            item = RankedMemory(memory=memory, similarity=0.0, score=0.0)
            cost = estimate_tokens(render_item(item, today=today))
            if cost > room:
                continue
            core_items.append(item)
            room -= cost
            taken.add(memory.id)
            seen.add(_fact_key(memory))
    return Block(kept_profile, core_items, items, dropped)
