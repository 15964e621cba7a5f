"""Operators' flows: failed turns (list, retry) and the state of the embeddings."""

from __future__ import annotations

from typing import Any

from service.core.records import RequeueResult, TurnStatus
from service.flows.runtime import Runtime
from service.flows.turns import defer_extraction
from service.storage import admin, vectors
from service.storage.admin import TurnSummary

__all__ = ["embedding_state", "list_turns", "retry_turn"]


async def list_turns(
    rt: Runtime, *, status: TurnStatus, limit: int, offset: int
) -> tuple[list[TurnSummary], int]:
    """A page of turns with `status`, newest first, without message texts, and the total."""
    async with rt.db.unit_of_work() as session:
        return await admin.list_turns(session, status=status, limit=limit, offset=offset)


async def retry_turn(rt: Runtime, *, turn_id: int) -> RequeueResult:
    """Queue a failed turn's extraction again.

    The row goes back to queued in one transaction; its job is queued after the commit, so a
    crash in between leaves a queued turn that the next start queues (`requeue_waiting_turns`).
    The job extracts it once, as any fresh turn.
    """
    async with rt.db.unit_of_work() as session:
        result, user_id = await admin.requeue_failed(session, turn_id=turn_id)
    if result is RequeueResult.REQUEUED:
        await defer_extraction(rt, turn_id=turn_id, user_id=user_id)
    return result


async def embedding_state(rt: Runtime) -> dict[str, Any]:
    """The loaded model, its dimension, memories waiting for its vectors and models in use."""
    model = rt.encoder.model_name
    async with rt.db.unit_of_work() as session:
        waiting = await vectors.count_pending(session, model=model)
        in_use = await vectors.models_in_use(session)
    return {
        "model": model,
        "dimension": rt.encoder.dimension,
        "memories_waiting": waiting,
        "memories_by_model": {
            name or "(none)": n
            for name, n in sorted(in_use.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
        },
    }
