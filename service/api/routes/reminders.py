"""Per-user reminders (list, set, read, cancel), next to the memories API."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Path, Response, status

from service.api.deps import RuntimeDep
from service.api.schemas import ReminderCreate, ReminderList, ReminderRead
from service.core.reminders import ReminderState
from service.flows import reminders

router = APIRouter(prefix="/v1/users/{user_id}/reminders", tags=["reminders"])

UserId = Path(min_length=1, max_length=255, description="Open WebUI user id")
ReminderId = Path(min_length=1, max_length=32, description="reminder id, e.g. `r-k7m2qa`")


@router.get("", response_model=ReminderList)
async def list_reminders(
    rt: RuntimeDep,
    user_id: str = UserId,
    state: Literal["pending", "fired"] | None = None,
) -> ReminderList:
    """The user's reminders that are not cancelled: pending ones and those already shown
    (`state` keeps one of the two), oldest first.
    """
    found = await reminders.list_for_user(rt, user_id=user_id)
    if state is not None:
        found = [r for r in found if r.state is ReminderState(state)]
    return ReminderList(items=[ReminderRead.from_record(r) for r in found], total=len(found))


@router.post("", response_model=ReminderRead, status_code=status.HTTP_201_CREATED)
async def add_reminder(body: ReminderCreate, rt: RuntimeDep, user_id: str = UserId) -> ReminderRead:
    """Set a reminder, due at `due_at` or when a later private-chat message is close to `cue`.

    In a chat, users just ask: "remind me on Friday to call the vet".
    """
    reminder = await reminders.create_for_user(
        rt,
        user_id=user_id,
        content=body.content,
        due_at=body.due_at,
        cue=body.cue,
        timezone=body.timezone,
    )
    return ReminderRead.from_record(reminder)


@router.get("/{reminder_id}", response_model=ReminderRead)
async def get_reminder(
    rt: RuntimeDep, user_id: str = UserId, reminder_id: str = ReminderId
) -> ReminderRead:
    """One reminder of the user; 404 when it is not theirs or was cancelled."""
    return ReminderRead.from_record(
        await reminders.get_for_user(rt, user_id=user_id, code=reminder_id)
    )


@router.delete("/{reminder_id}", status_code=status.HTTP_204_NO_CONTENT)
async def cancel_reminder(
    rt: RuntimeDep, user_id: str = UserId, reminder_id: str = ReminderId
) -> Response:
    """Cancel a reminder: its text is removed and it never fires; 404 when not the user's."""
    await reminders.cancel_for_user(rt, user_id=user_id, code=reminder_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
