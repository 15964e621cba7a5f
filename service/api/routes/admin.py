"""Operations: failed turns (list, retry), the embeddings' state and Prometheus metrics.

Everything here needs the bearer key, like `/v1`. Listings never carry message text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response, status
from pydantic import BaseModel, Field

from service import observability
from service.api.deps import RuntimeDep
from service.core.records import RequeueResult, TurnStatus
from service.flows import admin
from service.flows import status as status_flow

router = APIRouter(prefix="/v1/admin", tags=["admin"])
metrics_router = APIRouter(tags=["admin"])

MAX_TURN_ID = 2**63 - 1  # the ledger id is a bigint
MAX_OFFSET = 1_000_000_000


class TurnListItem(BaseModel):
    """A turn of the ledger, without its message texts."""

    id: int
    chat_id: str
    user_message_id: str
    user_id: str
    status: TurnStatus
    error: str | None = Field(description="Why it failed (first line).")
    memories_written: int
    created_at: datetime
    finished_at: datetime | None
    retryable: bool = Field(description="Failed and its texts are still stored.")


class TurnList(BaseModel):
    """One page of turns and how many match in all."""

    items: list[TurnListItem]
    total: int


class RetryAnswer(BaseModel):
    """The outcome of retrying failed turns, with a sentence for the admin."""

    status: str
    detail: str


class EmbeddingState(BaseModel):
    """The loaded embedding model and how many memories each model's vectors cover."""

    model: str = Field(description="Name of the loaded embedding model.")
    dimension: int
    memories_waiting: int = Field(description="Memories still waiting for this model's vector.")
    memories_by_model: dict[str, int]


@router.get("/turns", response_model=TurnList)
async def list_turns(
    rt: RuntimeDep,
    status_: Annotated[TurnStatus, Query(alias="status")] = TurnStatus.FAILED,
    limit: int = Query(default=50, ge=1, le=200),
    offset: int = Query(default=0, ge=0, le=MAX_OFFSET),
) -> TurnList:
    """Turns with a status (default `failed`), newest first: ids, sender, error, whether a
    retry can run. Message texts are never listed.
    """
    items, total = await admin.list_turns(rt, status=status_, limit=limit, offset=offset)
    return TurnList(
        total=total,
        items=[
            TurnListItem(
                id=t.id,
                chat_id=t.chat_id,
                user_message_id=t.user_message_id,
                user_id=t.user_id,
                status=t.status,
                error=t.error,
                memories_written=t.memories_written,
                created_at=t.created_at,
                finished_at=t.finished_at,
                retryable=t.status is TurnStatus.FAILED and t.has_texts,
            )
            for t in items
        ],
    )


_RETRY_ERRORS: dict[RequeueResult, tuple[int, str]] = {
    RequeueResult.NOT_FOUND: (404, "no turn with this id"),
    RequeueResult.NOT_FAILED: (409, "this turn has not failed; there is nothing to retry"),
    RequeueResult.NO_TEXTS: (
        409,
        "this turn's message texts were erased when it failed; there is nothing left to extract",
    ),
}


@router.post(
    "/turns/{turn_id}/retry", response_model=RetryAnswer, status_code=status.HTTP_202_ACCEPTED
)
async def retry_turn(rt: RuntimeDep, turn_id: int = Path(ge=1, le=MAX_TURN_ID)) -> RetryAnswer:
    """Queue a failed turn's extraction again; it runs once, as a fresh turn would.

    `404` for an unknown id; `409` when the turn has not failed or its texts are gone.
    """
    result = await admin.retry_turn(rt, turn_id=turn_id)
    if result in _RETRY_ERRORS:
        code, detail = _RETRY_ERRORS[result]
        raise HTTPException(status_code=code, detail=detail)
    return RetryAnswer(status="queued", detail="the turn is queued for extraction again")


@router.get("/embeddings", response_model=EmbeddingState)
async def embeddings(rt: RuntimeDep) -> EmbeddingState:
    """The loaded embedding model and how many memories still wait for its vectors (after a
    model change they are re-embedded in the background; keyword search finds them meanwhile).
    """
    return EmbeddingState(**await admin.embedding_state(rt))


def _registry(request: Request) -> tuple[observability.ScrapeState, Any]:
    found = getattr(request.app.state, "metrics", None)
    if found is None:
        app = request.app
        state = observability.ScrapeState()
        found = (
            state,
            observability.build_registry(state, lambda: getattr(app.state, "runtime", None)),
        )
        app.state.metrics = found
    return found


@metrics_router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text format; database gauges are read at scrape time."""
    state, registry = _registry(request)
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is not None:
        await status_flow.read_metrics_state(runtime, state)
    return Response(observability.render(registry), media_type=observability.CONTENT_TYPE)
