"""Import of memories: a JSON export restored into a user's banks (an admin moving or
restoring a user; the export itself is `GET /v1/users/{id}/memories/export`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Body, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from service.api.deps import RuntimeDep
from service.api.schemas import ChatContextIn, CommandResponse
from service.core.imports import MAX_IMPORT_ITEMS
from service.flows import chat_owner, import_command, imports

router = APIRouter(prefix="/v1/users/{user_id}/memories", tags=["memories"])

MAX_EPOCH_S = 253_402_300_799
"""9999-12-31T23:59:59Z, the last second Python's datetime holds."""
chat_router = APIRouter(prefix="/v1", tags=["chat"])


class OpenWebUIMemory(BaseModel):
    """One row of Open WebUI's `memory` table, as the filter reads it."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=255)
    content: str = Field(max_length=20_000)
    created_at: float = Field(ge=0, le=MAX_EPOCH_S, description="epoch seconds")
    updated_at: float | None = Field(default=None, ge=0, le=MAX_EPOCH_S, description="epoch s")


class OpenWebUIImport(BaseModel):
    """`/memory import openwebui` from the filter: the chat and the sender's memories."""

    model_config = ConfigDict(extra="forbid")

    chat: ChatContextIn
    memories: list[OpenWebUIMemory] = Field(max_length=MAX_IMPORT_ITEMS)
    include_forgotten: bool = Field(
        default=False,
        description="also the memories the user forgot here (`/memory import openwebui "
        "forgotten`); without it they are skipped and counted",
    )
    now: datetime | None = None


@chat_router.post("/imports/openwebui", response_model=CommandResponse)
async def import_openwebui(body: OpenWebUIImport, rt: RuntimeDep) -> CommandResponse:
    """Import the sender's Open WebUI memories into their Personal bank (deduplicated, tagged
    `import:openwebui`, dated with their own times); `text` is shown to the user verbatim.
    403 for another user's private chat or folder.
    """
    chat = body.chat.to_record()
    await chat_owner.check(rt, chat)
    rows = [
        (
            m.content,
            datetime.fromtimestamp(m.created_at, UTC),
            datetime.fromtimestamp(m.updated_at or m.created_at, UTC),
        )
        for m in body.memories
        if m.content.strip()
    ]
    text = await import_command.from_openwebui(
        rt, chat, rows, include_forgotten=body.include_forgotten
    )
    return CommandResponse(command="import", text=text)


@router.post("/import")
async def import_memories(
    rt: RuntimeDep,
    user_id: str = Path(min_length=1, max_length=255, description="Open WebUI user id"),
    data: list[dict[str, Any]] | dict[str, Any] = Body(  # noqa: B008 - FastAPI's way
        description='the JSON of GET …/memories/export (a list, or {"memories": [...]})'
    ),
    dry_run: bool = Query(default=False, description="Count what would be added; write nothing."),
) -> dict[str, int]:
    """Restore the active memories of an export with their bank, tags, confidence, dates and
    provenance; memories already stored (same text in the same bank) are skipped, so a second
    import of the same file adds nothing. Superseded and archived versions and Chat Memory
    are counted, not restored. 400 with a sentence when the data is not an export.

    Returns:
        {"added", "would_add", "duplicates", "refused", "not_allowed", "over_cap",
        "history_skipped", "chat_memory_skipped"}: counts of memories ("over_cap": new
        ones past the owner's MEMORY_CAP of active memories, not written).

    Raises:
        ScopeDenied: (403) a Project memory of the file names another user's private folder.
    """
    await chat_owner.check_folders(rt, user_id=user_id, folder_ids=_folder_ids(data))
    result = await imports.restore_export(
        rt, user_id=user_id, data=data, actor="api:import", dry_run=dry_run
    )
    return result.as_json()


def _folder_ids(data: list[dict[str, Any]] | dict[str, Any]) -> list[str]:
    """The folder ids an export names (its Project memories'), before it is parsed: each is
    checked like the `folder_id` of the other memory routes.
    """
    entries = data.get("memories") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        return []
    return [
        e["folder_id"]
        for e in entries
        if isinstance(e, dict) and isinstance(e.get("folder_id"), str)
    ]
