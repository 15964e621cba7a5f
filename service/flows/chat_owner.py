"""Whose chat it is, as far as the service knows: a defence in depth behind the filter and
the Remember action, which check access inside Open WebUI (issue 27).

Every chat route says which user acts in which chat. A chat another user handed turns over
from as their private chat is theirs: a request naming it for someone else (a forged or
mistaken chat id) must neither read nor write its Chat Memory, nor learn from it, so it is
refused with 403 and a sentence. A chat its owner shared (a shared folder, a chat shared to
continue) hands turns over as collaborative, and its other members pass; until the owner's
first turn after sharing, the owner's last word (private) stands and they are refused.
"""

from __future__ import annotations

from service.core.records import ChatContext, ChatKind
from service.errors import ScopeDenied
from service.flows.runtime import Runtime
from service.storage import turns

__all__ = ["check"]


async def check(rt: Runtime, chat: ChatContext) -> None:
    """Raise ScopeDenied when `chat` is a saved chat another user handed over privately.

    Raises:
        ScopeDenied: the chat id is another user's private chat (the sentence names no one).
        DatabaseUnavailable: PostgreSQL cannot be reached.
    """
    if chat.kind is not ChatKind.SAVED or not chat.chat_id:
        return
    async with rt.db.reads() as session:
        theirs = await turns.private_to_another(session, chat_id=chat.chat_id, user_id=chat.user_id)
    if theirs:
        raise ScopeDenied(
            f"chat {chat.chat_id} is another user's private chat: memory is neither read nor "
            f"written there for user {chat.user_id}"
        )
