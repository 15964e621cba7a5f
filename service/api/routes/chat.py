"""Routes the filter calls on every turn: context (inlet) and turns (outlet)."""

from __future__ import annotations

from fastapi import APIRouter, status

from service.api.deps import RuntimeDep
from service.api.schemas import (
    CommandRequest,
    CommandResponse,
    ContextMemory,
    ContextRequest,
    ContextResponse,
    ReminderRead,
    TurnRequest,
    TurnResponse,
)
from service.flows import chat_owner, commands, context, turns
from service.flows import status as status_flow

router = APIRouter(prefix="/v1", tags=["chat"])

PAUSED_NOTICE = "Memory is paused: nothing new is learned from this chat (/memory resume)"


@router.post("/context", response_model=ContextResponse)
async def post_context(body: ContextRequest, rt: RuntimeDep) -> ContextResponse:
    """Memories for the inlet: the block to append to the system message.

    Only memories the chat may read are considered (DESIGN §3): nothing for API calls,
    automations and background tasks; never Personal memories in collaborative chats.
    In a private chat the sender's due reminders are added in a "Reminders" section, once
    each, and a "remind me …" in the message is set (or answered with why not).
    """
    chat = body.chat.to_record()
    await chat_owner.check(rt, chat)
    result = await context.build_context(
        rt,
        chat=chat,
        message=body.message,
        budget_tokens=body.budget_tokens,
        now=body.now,
        message_id=body.user_message_id,
    )
    return ContextResponse(
        block=result.block,
        memories=[
            ContextMemory(
                id=r.memory.id,
                bank=r.memory.bank,
                content=r.memory.content,
                similarity=round(r.similarity, 4),
                score=round(r.score, 4),
                created_at=r.memory.created_at,
            )
            for r in result.items
        ],
        profile=result.profile,
        status=result.status,
        reminders=[ReminderRead.from_record(r) for r in result.reminders],
        notice=result.notice,
    )


@router.post("/turns", response_model=TurnResponse, status_code=status.HTTP_202_ACCEPTED)
async def post_turn(body: TurnRequest, rt: RuntimeDep) -> TurnResponse:
    """Hand over a finished turn (outlet). Answers at once; extraction runs as a durable job.

    Idempotent per (chat_id, user_message_id): a repeated outlet or a regenerated reply
    answers `duplicate` and is never extracted twice.
    """
    chat = body.chat.to_record()
    await chat_owner.check(rt, chat)
    state, detail = await turns.accept_turn(
        rt,
        chat=chat,
        user_message_id=body.user_message_id,
        user_message=body.user_message,
        assistant_message=body.assistant_message,
        history=[(m.role, m.content) for m in body.history],
        occurred_at=body.occurred_at,
        parent_message_id=body.parent_message_id,
    )
    notice = None
    if state == "skipped" and detail == turns.PAUSED_DETAIL:
        notice = PAUSED_NOTICE
    waits_for_llm = state == "queued" and not rt.llm.configured
    admin_notice = status_flow.admin_notice(
        llm_configured=not waits_for_llm, failed=await status_flow.failed_turns(rt)
    )
    return TurnResponse(
        status=state,  # type: ignore[arg-type]
        detail=detail,
        notice=notice,
        admin_notice=admin_notice,
    )


@router.post("/commands", response_model=CommandResponse)
async def post_command(body: CommandRequest, rt: RuntimeDep) -> CommandResponse:
    """Run a `/memory …` command typed in the chat; `text` is shown to the user verbatim.

    No LLM is used (but by `/memory import` of free text). Unknown commands and wrong ids get
    a helpful `text`, not an error.
    """
    chat = body.chat.to_record()
    await chat_owner.check(rt, chat)
    name, text = await commands.run_command(rt, chat=chat, command_text=body.command, now=body.now)
    return CommandResponse(command=name, text=text)
