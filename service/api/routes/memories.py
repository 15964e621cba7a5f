"""Per-user memory management (list, add, read, edit, forget)."""

from __future__ import annotations

import uuid
from typing import Literal

from fastapi import APIRouter, Path, Query, Response, status

from service.api.deps import RuntimeDep
from service.api.schemas import MemoryCreate, MemoryList, MemoryRead, MemoryUpdate
from service.core.records import Bank
from service.flows import chat_owner, memories
from service.flows.commands import export_json
from service.flows.imports import export_markdown

router = APIRouter(prefix="/v1/users/{user_id}/memories", tags=["memories"])
chats = APIRouter(prefix="/v1", tags=["memories"])

UserId = Path(min_length=1, max_length=255, description="Open WebUI user id")
AssistantId = Query(
    default=None,
    max_length=255,
    description="also the user's memory for this assistant (a model with its own memory)",
)


@router.get("", response_model=MemoryList)
async def list_memories(
    rt: RuntimeDep,
    user_id: str = UserId,
    bank: Bank | None = None,
    folder_id: str | None = Query(default=None, max_length=255),
    limit: int = Query(default=50, ge=1, le=200),
    offset: int = Query(default=0, ge=0),
    assistant_id: str | None = AssistantId,
) -> MemoryList:
    """The user's active memories, newest first (plus a folder's Project Memory and the
    user's memory for an assistant, if given).
    """
    await chat_owner.check_folder(rt, user_id=user_id, folder_id=folder_id)
    items, total = await memories.list_for_user(
        rt,
        user_id=user_id,
        bank=bank,
        folder_id=folder_id,
        limit=limit,
        offset=offset,
        assistant_id=assistant_id,
    )
    return MemoryList(items=[MemoryRead.from_record(m) for m in items], total=total)


@router.post("", response_model=MemoryRead, status_code=status.HTTP_201_CREATED)
async def add_memory(body: MemoryCreate, rt: RuntimeDep, user_id: str = UserId) -> MemoryRead:
    """Add a memory written by the user (Project Memory needs `folder_id`, Assistant Memory
    `assistant_id`).
    """
    await chat_owner.check_folder(rt, user_id=user_id, folder_id=body.folder_id)
    memory = await memories.add_for_user(
        rt,
        user_id=user_id,
        content=body.content,
        bank=body.bank,
        tags=body.tags,
        folder_id=body.folder_id,
        assistant_id=body.assistant_id,
    )
    return MemoryRead.from_record(memory)


@router.get("/search", response_model=MemoryList)
async def search_memories(
    rt: RuntimeDep,
    user_id: str = UserId,
    q: str = Query(
        min_length=1,
        max_length=4_000,
        description="keywords; `;` separates phrases, e.g. `cargo bike; Sam`",
    ),
    folder_id: str | None = Query(default=None, max_length=255),
    limit: int = Query(default=20, ge=1, le=200),
    assistant_id: str | None = AssistantId,
) -> MemoryList:
    """Keyword search: each `;`-separated phrase (at most 60) matched as a phrase, any of them,
    most relevant first. Any characters are allowed.
    """
    await chat_owner.check_folder(rt, user_id=user_id, folder_id=folder_id)
    scope = memories.owned_scope(user_id, folder_id=folder_id, assistant_id=assistant_id)
    found = await memories.keyword_search(rt, scope=scope, text=q, limit=limit)
    return MemoryList(items=[MemoryRead.from_record(m) for m in found], total=len(found))


@router.get("/export", response_model=None)
async def export_memories(
    rt: RuntimeDep,
    user_id: str = UserId,
    folder_id: str | None = Query(default=None, max_length=255),
    format: Literal["json", "markdown"] = Query(
        default="json", description="json (to import again) or markdown (to read)"
    ),
) -> list[dict[str, object]] | Response:
    """Every memory of the user that still has content (active, superseded, archived;
    their own banks and their memory for every assistant), as JSON — the same data
    `/memory export` shows, and what `POST …/memories/import` reads — or, with
    `format=markdown`, the active ones as a document for people.
    """
    await chat_owner.check_folder(rt, user_id=user_id, folder_id=folder_id)
    rows = await memories.export_for_user(rt, user_id=user_id, folder_id=folder_id)
    if format == "markdown":
        return Response(content=export_markdown(rows), media_type="text/markdown; charset=utf-8")
    return export_json(rows)


@router.get("/{memory_id}", response_model=MemoryRead)
async def get_memory(
    memory_id: uuid.UUID,
    rt: RuntimeDep,
    user_id: str = UserId,
    folder_id: str | None = Query(default=None, max_length=255),
    assistant_id: str | None = AssistantId,
) -> MemoryRead:
    """One active memory of the user; 404 when it is not theirs or was forgotten."""
    await chat_owner.check_folder(rt, user_id=user_id, folder_id=folder_id)
    return MemoryRead.from_record(
        await memories.get_for_user(
            rt,
            user_id=user_id,
            memory_id=memory_id,
            folder_id=folder_id,
            assistant_id=assistant_id,
        )
    )


@router.patch("/{memory_id}", response_model=MemoryRead)
async def edit_memory(
    memory_id: uuid.UUID,
    body: MemoryUpdate,
    rt: RuntimeDep,
    user_id: str = UserId,
    folder_id: str | None = Query(default=None, max_length=255),
    assistant_id: str | None = AssistantId,
) -> MemoryRead:
    """Change a memory's text, bank or tags; the change is audited. 409 with the current text
    when `version` is not the current one, or another edit at the same moment changed the same
    words (edits of different words are merged).
    """
    await chat_owner.check_folder(rt, user_id=user_id, folder_id=folder_id)
    memory = await memories.edit_for_user(
        rt,
        user_id=user_id,
        memory_id=memory_id,
        content=body.content,
        bank=body.bank,
        tags=body.tags,
        folder_id=folder_id,
        assistant_id=assistant_id,
        version=body.version,
    )
    return MemoryRead.from_record(memory)


@router.delete("/{memory_id}", status_code=status.HTTP_204_NO_CONTENT)
async def forget_memory(
    memory_id: uuid.UUID,
    rt: RuntimeDep,
    user_id: str = UserId,
    folder_id: str | None = Query(default=None, max_length=255),
    assistant_id: str | None = AssistantId,
) -> Response:
    """Forget a memory everywhere; only a content-free tombstone stays."""
    await chat_owner.check_folder(rt, user_id=user_id, folder_id=folder_id)
    await memories.forget_for_user(
        rt, user_id=user_id, memory_id=memory_id, folder_id=folder_id, assistant_id=assistant_id
    )
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@chats.delete("/chats/{chat_id}/memories")
async def forget_chat_memories(
    rt: RuntimeDep,
    chat_id: str = Path(min_length=1, max_length=255),
) -> dict[str, int]:
    """A chat was deleted in Open WebUI: forget its Chat Memory (the Memory Events function
    calls this on `chat.deleted`).
    """
    return {
        "forgotten": await memories.forget_chat(
            rt, chat_ids=[chat_id], actor="openwebui:chat.deleted"
        )
    }


@chats.delete("/users/{user_id}/chat-memories")
async def forget_all_chat_memories(rt: RuntimeDep, user_id: str = UserId) -> dict[str, int]:
    """All of a user's chats were deleted: forget the Chat Memory of each."""
    return {
        "forgotten": await memories.forget_chats_of_user(
            rt, user_id=user_id, actor="openwebui:chat.deleted_all"
        )
    }


@chats.delete("/users/{user_id}/memories")
async def forget_user_memories(rt: RuntimeDep, user_id: str = UserId) -> dict[str, int]:
    """A user account was deleted: forget their Personal, Interaction Patterns, Assistant
    and Chat Memory, profile and settings (the Memory Events function calls this on `user.deleted`).
    Project Memory belongs to its folder and stays.
    """
    return {
        "forgotten": await memories.forget_user(rt, user_id=user_id, actor="openwebui:user.deleted")
    }


@chats.delete("/folders/{folder_id}/memories")
async def forget_folder_memories(
    rt: RuntimeDep,
    folder_id: str = Path(min_length=1, max_length=255),
    with_chats: bool = Query(
        default=False,
        description=("The folder's chats were deleted with it: forget their Chat Memory too."),
    ),
) -> dict[str, int]:
    """A folder was deleted in Open WebUI: forget its Project Memory (the Memory Events
    function calls this on `folder.deleted`, once per folder of the deleted subtree).
    """
    return {
        "forgotten": await memories.forget_folders(
            rt, folder_ids=[folder_id], with_chats=with_chats, actor="openwebui:folder.deleted"
        )
    }
