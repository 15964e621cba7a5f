"""Reminders of one turn (fire the due ones, set the one asked for) and of one user.

The inlet calls `for_turn` beside the ranking of memories: due reminders are marked fired in the
same statement that finds them, so each is injected once however many inlets run at once.
Reminders follow the Personal bank's rules (DESIGN §3; `core.reminders.owner_of`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from service.core import commands, reminder_parsing, safety
from service.core import reminders as policy
from service.core.records import ChatContext, ChatKind
from service.core.reminders import Reminder, ReminderState, RequestOutcome, TriggerKind
from service.errors import InvalidInput, ReminderNotFound
from service.flows import cache_sync, planted_check
from service.flows.runtime import Runtime
from service.storage import reminders
from service.storage.notifications import REMINDERS_CHANGE, Change

log = logging.getLogger(__name__)

NOT_SAVED = "it could not be saved just now; please ask again in a moment"


@dataclass(frozen=True, slots=True)
class TurnReminders:
    """What the reminders add to one inlet."""

    due: list[Reminder]  #: fired by this turn, oldest due first
    outcome: RequestOutcome | None  #: what became of a request in the message, if any
    section: str  #: the block's "Reminders" section; "" for nothing
    notice: str | None  #: one status line for the user


NOTHING = TurnReminders([], None, "", None)


async def for_turn(
    rt: Runtime,
    *,
    chat: ChatContext,
    message: str,
    now: datetime,
    message_id: str | None,
) -> TurnReminders:
    """Fire the sender's due reminders and set the one this message asks for.

    Only a private saved chat fires and sets reminders; in a shared or temporary chat a
    request is answered with the reason instead. Never raises: a failure is logged and the
    turn goes on (a request then says it was not saved).

    Args:
        chat: the turn's context.
        message: text of the user's message.
        now: the turn's time (tz-aware).
        message_id: the user message's id; with `chat.chat_id` it keys the reminder, so a
            regenerated reply never sets it twice (None: the message text is the key).
    """
    if chat.kind in (ChatKind.API, ChatKind.AUTOMATED, ChatKind.TASK) or not message.strip():
        return NOTHING
    zone, _ = policy.resolve_zone(chat.timezone)
    request = None
    if reminder_parsing.mentions_request(message):
        try:
            request = await asyncio.to_thread(
                reminder_parsing.find_request, message, now=now, zone_name=chat.timezone
            )
        except Exception:
            log.exception("could not read a reminder request")
    owner = policy.owner_of(chat)
    due: list[Reminder] = []
    outcome = None
    key = _source_key(chat, message=message, message_id=message_id)
    if owner is not None:
        try:
            due = await _fire(rt, user_id=owner, chat=chat, message=message, now=now, key=key)
        except Exception:
            log.exception("could not look for due reminders")
    if request is not None:
        outcome = await _settle(rt, chat=chat, owner=owner, request=request, now=now, key=key)
    return TurnReminders(
        due,
        outcome,
        policy.render_section(due, outcome, zone=zone),
        policy.notice(due, outcome, zone=zone),
    )


def _source_key(chat: ChatContext, *, message: str, message_id: str | None) -> str:
    if message_id:
        return f"{chat.chat_id}:{message_id}"
    digest = hashlib.sha256(" ".join(message.split()).encode()).hexdigest()[:32]
    return f"{chat.chat_id}:text:{digest}"


async def _fire(
    rt: Runtime,
    *,
    user_id: str,
    chat: ChatContext,
    message: str,
    now: datetime,
    key: str,
) -> list[Reminder]:
    if user_id in rt.reminders_none_pending and cache_sync.connected():
        return []  # most users have no reminder waiting: no query on their inlets
    seen = cache_sync.epoch()
    model = rt.encoder.model_name
    # reminders set from now on get this model's vectors when stored: one check per user and
    # hour keeps a query off most inlets
    if (user_id, model) not in rt.reminder_cues_current:
        async with rt.db.unit_of_work() as session:
            stale = await reminders.stale_cues(session, user_id=user_id, model=model)
        if stale:  # cues of another embedding model cannot be compared with this one's vectors
            vectors = await rt.encoder.encode([r.cue or "" for r in stale], bulk=True)
            async with rt.db.unit_of_work() as session:
                for reminder, vector in zip(stale, vectors, strict=True):
                    await reminders.store_cue_vector(
                        session, user_id=user_id, seq=reminder.seq, vector=vector, model=model
                    )
        rt.reminder_cues_current[(user_id, model)] = True
    vector = await rt.encoder.encode_one(message)  # cached: the ranking reuses it
    async with rt.db.unit_of_work() as session:
        due = await reminders.fire(
            session,
            user_id=user_id,
            now=now,
            query_vector=vector,
            model=model,
            min_similarity=rt.settings.reminder_similarity,
            chat_id=chat.chat_id,
            except_key=key,
        )
        # unless a reminder was set meanwhile (by any process: its notice advanced the epoch)
        if not await reminders.has_pending(session, user_id=user_id) and cache_sync.epoch() == seen:
            rt.reminders_none_pending[user_id] = True
    due.sort(key=lambda r: (r.due_at or r.created_at, r.seq))
    return due


async def _settle(
    rt: Runtime,
    *,
    chat: ChatContext,
    owner: str | None,
    request: reminder_parsing.ReminderRequest,
    now: datetime,
    key: str,
) -> RequestOutcome | None:
    """Set the requested reminder, or say why not (where first: no chat but a private one
    would set it, however it was phrased).
    """
    if owner is None:
        reason = (
            policy.NOT_IN_TEMPORARY_CHAT
            if chat.kind is ChatKind.TEMPORARY
            else policy.NOT_IN_SHARED_CHAT
        )
        return RequestOutcome(request.text, None, reason)
    if request.problem is not None:
        return RequestOutcome(request.text, None, request.problem)
    assert request.trigger is not None
    try:
        reminder = await _store(
            rt,
            user_id=owner,
            content=request.content,
            trigger=request.trigger,
            timezone=chat.timezone,
            now=now,
            source_chat_id=chat.chat_id or None,
            source_key=key,
        )
    except InvalidInput as exc:  # the planted-instruction check refused it
        return RequestOutcome(request.text, None, str(exc))
    except Exception:
        log.exception("could not store a reminder")
        return RequestOutcome(request.text, None, NOT_SAVED)
    if reminder.state is ReminderState.CANCELLED:
        return None  # set by an earlier inlet of this message, and cancelled since
    return RequestOutcome(request.text, reminder, None)


NOT_AN_INSTRUCTION = "a reminder holds something to tell the user, not instructions"


async def _store(
    rt: Runtime,
    *,
    user_id: str,
    content: str,
    trigger: reminder_parsing.Trigger,
    timezone: str | None,
    now: datetime,
    source_chat_id: str | None,
    source_key: str,
) -> Reminder:
    # never stored as plain text, as for memories (DESIGN §5.5)
    content = safety.redact_secrets(content)
    cue = safety.redact_secrets(trigger.cue) if trigger.cue is not None else None
    # the check every stored text gets (rules, nearest labelled examples, LLM verdict): a
    # reminder is shown to the assistant as a memory is
    if any(v.refused for v in await planted_check.verdicts(rt, [content, *([cue] if cue else [])])):
        raise InvalidInput(NOT_AN_INSTRUCTION)
    cue_vector = None
    if cue is not None:
        cue_vector = await rt.encoder.encode_one(cue)
    async with rt.db.unit_of_work() as session:
        stored = await reminders.insert(
            session,
            user_id=user_id,
            content=content,
            trigger=trigger.kind,
            due_at=trigger.due_at,
            all_day=trigger.all_day,
            timezone=policy.resolve_zone(timezone)[1],
            cue=cue,
            cue_vector=cue_vector,
            embedding_model=rt.encoder.model_name if cue_vector is not None else None,
            source_chat_id=source_chat_id,
            source_key=source_key,
            created_at=now,
        )
    rt.reminders_none_pending.pop(user_id, None)  # after the commit: the next inlet sees it
    return stored


# --- the user's reminders: commands and the HTTP API -----------------------------------------


async def list_for_user(
    rt: Runtime,
    *,
    user_id: str,
    fired_since: datetime | None = None,
) -> list[Reminder]:
    """The user's pending reminders and fired ones (since `fired_since`; None: all)."""
    async with rt.db.unit_of_work() as session:
        return await reminders.list_for_user(session, user_id=user_id, fired_since=fired_since)


async def get_for_user(rt: Runtime, *, user_id: str, code: str) -> Reminder:
    """One of the user's reminders by its id (`r-k7m2qa`).

    Raises:
        ReminderNotFound: not an id, another user's, or cancelled.
    """
    seq = policy.parse_reminder_code(code)
    if seq is not None:
        async with rt.db.unit_of_work() as session:
            found = await reminders.get(session, user_id=user_id, seq=seq)
        if found is not None:
            return found
    raise ReminderNotFound(f"no reminder {code} for this user")


async def cancel_for_user(rt: Runtime, *, user_id: str, code: str) -> Reminder:
    """Cancel one of the user's reminders; its text is removed, a tombstone stays.

    Returns:
        The reminder as it was before.

    Raises:
        ReminderNotFound: not an id, another user's, or already cancelled.
    """
    found = await get_for_user(rt, user_id=user_id, code=code)
    async with rt.db.unit_of_work() as session:
        cancelled = await reminders.cancel(
            session, user_id=user_id, seqs=[found.seq], at=datetime.now(UTC)
        )
    if not cancelled:
        raise ReminderNotFound(f"no reminder {code} for this user")
    return found


async def cancel_all(rt: Runtime, *, user_id: str) -> int:
    """Cancel every reminder of the user (`/memory forget all`). Returns how many."""
    async with rt.db.unit_of_work() as session:
        kept = await reminders.list_for_user(session, user_id=user_id, fired_since=None)
        return len(
            await reminders.cancel(
                session, user_id=user_id, seqs=[r.seq for r in kept], at=datetime.now(UTC)
            )
        )


async def create_for_user(
    rt: Runtime,
    *,
    user_id: str,
    content: str,
    due_at: datetime | None,
    cue: str | None,
    timezone: str | None,
) -> Reminder:
    """Set a reminder given its parts (the HTTP API), due at `due_at` or when `cue` comes up.

    Raises:
        InvalidInput: neither or both triggers, an empty or instruction-like text, or an
            unknown time zone.
    """
    text = unicodedata.normalize("NFC", content).strip()
    if not text:
        raise InvalidInput("the reminder text is empty")
    if safety.looks_like_instruction(text):
        raise InvalidInput(NOT_AN_INSTRUCTION)
    if (due_at is None) == (cue is None or not cue.strip()):
        raise InvalidInput("give either due_at (a time) or cue (a topic), not both or neither")
    if timezone is not None and policy.resolve_zone(timezone)[1] != timezone.strip():
        raise InvalidInput(
            f"unknown time zone {timezone!r}; use an IANA name such as Europe/Berlin"
        )
    trigger = (
        reminder_parsing.Trigger(TriggerKind.TIME, due_at=due_at)
        if due_at is not None
        else reminder_parsing.Trigger(TriggerKind.CONTEXT, cue=(cue or "").strip())
    )
    now = datetime.now(UTC)
    return await _store(
        rt,
        user_id=user_id,
        content=text,
        trigger=trigger,
        timezone=timezone,
        now=now,
        source_chat_id=None,
        source_key=f"api:{now.isoformat()}:{hashlib.sha256(text.encode()).hexdigest()[:16]}",
    )


# --- `/memory reminders` and `/memory forget r-…` ---------------------------------------------


async def list_command(rt: Runtime, *, chat: ChatContext, now: datetime | None) -> str:
    """The answer of `/memory reminders` in this chat."""
    if not policy.may_list(chat):
        return "Reminders are personal and never shown in a shared chat."
    at = now or datetime.now(UTC)
    kept = await list_for_user(
        rt, user_id=chat.user_id, fired_since=at - timedelta(days=policy.DONE_LISTED_DAYS)
    )
    return policy.list_text(kept, now=at, zone=policy.resolve_zone(chat.timezone)[0])


async def forget_command(rt: Runtime, *, chat: ChatContext, token: str) -> str:
    """The answer of `/memory forget r-…`: cancel one of the sender's reminders.

    Raises:
        InvalidInput: in a shared chat, or no such reminder of the sender (another user's
            id is refused in the same words as a missing one).
    """
    if not policy.may_list(chat):
        raise InvalidInput("reminders are personal; cancel them in a private chat")
    try:
        found = await cancel_for_user(rt, user_id=chat.user_id, code=token)
    except ReminderNotFound as exc:
        raise InvalidInput(
            f"there is no reminder {token.strip().lstrip('#')} that this chat may see"
        ) from exc
    zone = policy.resolve_zone(chat.timezone)[0]
    state = "" if found.state is ReminderState.PENDING else " (it had already been shown)"
    return (
        f"Cancelled reminder `{found.code}`{state}: "
        f"{commands.escape_markdown(policy.describe_trigger(found, zone))} · "
        f"{commands.escape_markdown(found.content)}"
    )


def invalidator(rt: Runtime) -> cache_sync.Handler:
    """`cache_sync` handler of `rt`'s "no reminder pending" set."""

    def invalidate(change: Change | None) -> None:
        if change is None:
            rt.reminders_none_pending.clear()
        elif change.kind == REMINDERS_CHANGE:
            rt.reminders_none_pending.pop(change.user_id, None)

    return invalidate
