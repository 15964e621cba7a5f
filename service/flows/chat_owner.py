"""Whose chat and whose folder it is, as far as the service knows: a defence in depth behind
the filter and the Remember action, which check access inside Open WebUI (issue 27, item 4).

Every chat route says which user acts in which chat, and in which folder. A chat another
user handed turns over from as their private chat is theirs: a request naming it for someone
else (a forged or mistaken chat id) must neither read nor write its Chat Memory, nor learn
from it, so it is refused with 403 and a sentence. A chat its owner shared (a shared folder,
a chat shared to continue) hands turns over as collaborative, and its other members pass;
until the owner's first turn after sharing, the owner's last word (private) stands and they
are refused.

Folders follow the same rule: a folder whose latest turn from anyone else came from a
private chat is that user's private folder (a folder shared with others makes every chat in
it collaborative, DESIGN §2), so another user naming it — in a chat request or in the
`folder_id` of the memory routes — neither reads nor writes its Project Memory. A folder no
turn came from yet names nobody's; the filter's membership check is then the only one.
"""

from __future__ import annotations

from service.core.records import ChatContext, ChatKind
from service.errors import ScopeDenied
from service.flows.runtime import Runtime
from service.storage import turns

__all__ = ["check", "check_folder", "check_folders"]


async def check(rt: Runtime, chat: ChatContext) -> None:
    """Raise ScopeDenied when `chat` is a saved chat another user handed over privately, or
    its folder is another user's private folder.

    Raises:
        ScopeDenied: the chat or folder id is another user's private one (the sentence names
            no one).
        DatabaseUnavailable: PostgreSQL cannot be reached.
    """
    if chat.kind is ChatKind.SAVED and chat.chat_id:
        async with rt.db.reads() as session:
            theirs = await turns.private_to_another(
                session, chat_id=chat.chat_id, user_id=chat.user_id
            )
        if theirs:
            raise ScopeDenied(
                f"chat {chat.chat_id} is another user's private chat: memory is neither read "
                f"nor written there for user {chat.user_id}"
            )
    await check_folder(rt, user_id=chat.user_id, folder_id=chat.folder_id)


async def check_folder(rt: Runtime, *, user_id: str, folder_id: str | None) -> None:
    """Raise ScopeDenied when `folder_id` is another user's private folder (nothing to check
    for None or "").

    Raises:
        ScopeDenied: another user's private folder (the sentence names no one).
        DatabaseUnavailable: PostgreSQL cannot be reached.
    """
    await check_folders(rt, user_id=user_id, folder_ids=[folder_id] if folder_id else [])


async def check_folders(rt: Runtime, *, user_id: str, folder_ids: list[str]) -> None:
    """`check_folder` for each distinct id of `folder_ids` (one read each, one session).

    Raises:
        ScopeDenied: one of them is another user's private folder.
        DatabaseUnavailable: PostgreSQL cannot be reached.
    """
    if not folder_ids:
        return
    async with rt.db.reads() as session:
        for folder_id in sorted(set(folder_ids)):
            if await turns.folder_private_to_another(session, folder_id=folder_id, user_id=user_id):
                raise ScopeDenied(
                    f"folder {folder_id} is another user's private folder: its Project Memory "
                    f"is neither read nor written for user {user_id}"
                )
