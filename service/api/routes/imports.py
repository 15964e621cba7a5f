"""Import of memories: a JSON export restored into a user's banks (an admin moving or
restoring a user; the export itself is `GET /v1/users/{id}/memories/export`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Path, Query

from service.api.deps import RuntimeDep
from service.flows import imports

router = APIRouter(prefix="/v1/users/{user_id}/memories", tags=["memories"])


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
        {"added", "would_add", "duplicates", "refused", "not_allowed", "history_skipped",
        "chat_memory_skipped"}: counts of memories.
    """
    result = await imports.restore_export(
        rt, user_id=user_id, data=data, actor="api:import", dry_run=dry_run
    )
    return result.as_json()
