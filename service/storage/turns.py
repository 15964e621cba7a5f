"""The turn ledger: one row per (chat, user message), the idempotency key of extraction.

A turn is also unique by its message hash within the chat, so the same message handed over
under another id is a duplicate. Turns wait as `queued` until their batch is extracted
(`service/core/batching.py`); a done turn keeps its texts only while the chat's rolling
summary does not cover them yet (`service/core/chat_summary.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, String, func, literal_column, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.core.records import TurnStatus as TurnStatus  # re-exported for callers
from service.storage.tables import TurnRow


@dataclass(frozen=True, slots=True)
class Turn:
    """A ledger row as it leaves storage."""

    id: int  #: ledger id (job argument)
    chat_id: str  #: chat of the turn
    user_message_id: str  #: user message of the turn
    user_id: str  #: sender
    status: TurnStatus  #: queued, done or failed
    payload: dict[str, Any]  #: chat context and texts (texts erased once no longer needed)
    message_hash: str | None = None  #: identity of the user message in its chat
    estimated_tokens: int = 0  #: estimated tokens of its texts (batching margin included)


def _to_turn(row: TurnRow) -> Turn:
    return Turn(
        row.id,
        row.chat_id,
        row.user_message_id,
        row.user_id,
        TurnStatus(row.status),
        dict(row.payload),
        row.message_hash,
        row.estimated_tokens,
    )


async def accept(
    session: AsyncSession,
    *,
    chat_id: str,
    user_message_id: str,
    user_id: str,
    payload: dict[str, Any],
    message_hash: str | None = None,
    estimated_tokens: int = 0,
) -> int | None:
    """Record a turn; returns its id, or None when this (chat, message id) or this
    (chat, message hash) was seen before.
    """
    stmt = (
        pg_insert(TurnRow)
        .values(
            chat_id=chat_id,
            user_message_id=user_message_id,
            user_id=user_id,
            status=TurnStatus.QUEUED.value,
            payload=payload,
            message_hash=message_hash,
            estimated_tokens=estimated_tokens,
        )
        .on_conflict_do_nothing()  # either unique key: message id or message hash
        .returning(TurnRow.id)
    )
    return (await session.execute(stmt)).scalar()


async def get(session: AsyncSession, *, turn_id: int) -> Turn | None:
    """The turn, without a lock."""
    row = (await session.execute(select(TurnRow).where(TurnRow.id == turn_id))).scalar()
    return _to_turn(row) if row else None


async def id_of(session: AsyncSession, *, chat_id: str, user_message_id: str) -> int | None:
    """Ledger id of the turn of this chat and user message, if it was handed over."""
    return (
        await session.execute(
            select(TurnRow.id).where(
                TurnRow.chat_id == chat_id, TurnRow.user_message_id == user_message_id
            )
        )
    ).scalar()


async def first_id_of(
    session: AsyncSession, *, chat_id: str, user_message_ids: Sequence[str]
) -> int | None:
    """The lowest ledger id among the turns of this chat and these user messages (`id_of`
    for many messages at once); None when none was handed over.
    """
    if not user_message_ids:
        return None
    return (
        await session.execute(
            select(func.min(TurnRow.id)).where(
                TurnRow.chat_id == chat_id,
                TurnRow.user_message_id.in_(list(dict.fromkeys(user_message_ids))),
            )
        )
    ).scalar()


async def pending(
    session: AsyncSession,
    *,
    chat_id: str,
    user_id: str,
    up_to: int | None = None,
    lock: bool = False,
    unclaimed: bool = False,
) -> list[Turn]:
    """One sender's queued turns in one chat, oldest first.

    Args:
        up_to: only turns with an id up to this one (None: all).
        unclaimed: leave out turns another job is extracting (`claim`).
        lock: row-lock them until the unit of work ends (the batch that extracts them).
    """
    stmt = (
        select(TurnRow)
        .where(
            TurnRow.chat_id == chat_id,
            TurnRow.user_id == user_id,
            TurnRow.status == TurnStatus.QUEUED.value,
        )
        .order_by(TurnRow.id)
    )
    if up_to is not None:
        stmt = stmt.where(TurnRow.id <= up_to)
    if unclaimed:
        stmt = stmt.where(or_(TurnRow.claimed_until.is_(None), TurnRow.claimed_until <= func.now()))
    if lock:
        stmt = stmt.with_for_update()
    return [_to_turn(r) for r in (await session.execute(stmt)).scalars()]


async def newer_recent(
    session: AsyncSession,
    *,
    chat_id: str,
    turn_id: int,
    within_s: float,
    user_id: str | None = None,
) -> bool:
    """True when the chat has a turn accepted after `turn_id` and less than `within_s`
    seconds ago (database clock), by `user_id` when given.

    Such a turn's own quiet check is still to come; an older one's has run already.
    """
    stmt = select(TurnRow.id).where(
        TurnRow.chat_id == chat_id,
        TurnRow.id > turn_id,
        TurnRow.created_at > func.now() - func.make_interval(0, 0, 0, 0, 0, 0, within_s),
    )
    if user_id is not None:
        stmt = stmt.where(TurnRow.user_id == user_id)
    return (await session.execute(stmt.limit(1))).first() is not None


async def uncovered(session: AsyncSession, *, chat_id: str) -> list[Turn]:
    """Done turns of a chat that still keep their texts for the rolling summary, oldest
    first, row-locked until the unit of work ends.
    """
    stmt = (
        select(TurnRow)
        .where(
            TurnRow.chat_id == chat_id,
            TurnRow.status == TurnStatus.DONE.value,
            TurnRow.payload.has_key("texts"),
        )
        .order_by(TurnRow.id)
        .with_for_update()
    )
    return [_to_turn(r) for r in (await session.execute(stmt)).scalars()]


async def erase_texts(session: AsyncSession, *, turn_ids: list[int]) -> None:
    """Remove the message texts of done turns (only the ledger key stays)."""
    if turn_ids:
        await session.execute(
            update(TurnRow)
            .where(TurnRow.id.in_(turn_ids), TurnRow.status == TurnStatus.DONE.value)
            .values(payload=TurnRow.payload.op("-")("texts"))
        )


async def lock_sender(session: AsyncSession, *, user_id: str) -> None:
    """Serialize one sender's extractions until the transaction ends (advisory lock).

    Two turns of the same user then never insert the same new fact side by side; the lock
    is released on commit, rollback or a lost connection.
    """
    await session.execute(
        select(func.pg_advisory_xact_lock(func.hashtextextended("memory-sender:" + user_id, 0)))
    )


async def claim(session: AsyncSession, *, turn_ids: Sequence[int], for_s: float) -> None:
    """Mark turns as being extracted for `for_s` seconds (database clock); see migration 0010."""
    if turn_ids:
        await session.execute(
            update(TurnRow)
            .where(TurnRow.id.in_(list(turn_ids)))
            .values(claimed_until=func.now() + func.make_interval(0, 0, 0, 0, 0, 0, for_s))
        )


async def any_claimed(session: AsyncSession, *, turn_ids: Sequence[int]) -> bool:
    """True when one of these turns is claimed now (database clock)."""
    if not turn_ids:
        return False
    stmt = (
        select(func.count())
        .select_from(TurnRow)
        .where(TurnRow.id.in_(list(turn_ids)), TurnRow.claimed_until > func.now())
    )
    return bool((await session.execute(stmt)).scalar())


async def release_claims(session: AsyncSession, *, turn_ids: Sequence[int] | None = None) -> None:
    """Let other jobs take these turns again (None: every turn, at start-up)."""
    stmt = update(TurnRow).where(TurnRow.claimed_until.is_not(None))
    if turn_ids is not None:
        stmt = stmt.where(TurnRow.id.in_(list(turn_ids)))
    await session.execute(stmt.values(claimed_until=None))


async def lock_still_queued(session: AsyncSession, *, turn_ids: Sequence[int]) -> set[int]:
    """Row-lock these turns until the unit of work ends (ascending id); the ids still queued.

    A batch read in one transaction is written in another, after its LLM call: a turn
    discarded meanwhile (its chat or sender deleted, forget all) or closed by another job is
    left out, so nothing is written for it.
    """
    if not turn_ids:
        return set()
    stmt = (
        select(TurnRow.id, TurnRow.status)
        .where(TurnRow.id.in_(list(turn_ids)))
        .order_by(TurnRow.id)
        .with_for_update()
    )
    rows = (await session.execute(stmt)).all()
    return {int(i) for i, status in rows if status == TurnStatus.QUEUED.value}


async def finish(
    session: AsyncSession,
    *,
    turn_id: int,
    status: TurnStatus,
    memories_written: int = 0,
    error: str | None = None,
    keep_texts: bool = False,
) -> None:
    """Close a turn. A done turn's message texts are erased (only the ledger key stays)
    unless `keep_texts` (the chat's rolling summary has yet to cover them: then only the
    user message and the reply stay, not the earlier messages sent with them); a failed one
    keeps them, already redacted of secrets, until it is retried.
    """
    if status is not TurnStatus.DONE:
        payload: Any = TurnRow.payload
    elif keep_texts:
        payload = TurnRow.payload.op("#-")(literal_column("'{texts,history}'"))
    else:
        payload = TurnRow.payload.op("-")("texts")
    await session.execute(
        update(TurnRow)
        .where(TurnRow.id == turn_id)
        .values(
            status=status.value,
            memories_written=memories_written,
            error=error,
            finished_at=datetime.now(UTC),
            payload=payload,
            claimed_until=None,
        )
    )


async def discard(
    session: AsyncSession,
    *,
    chat_ids: Sequence[str] = (),
    user_id: str | None = None,
) -> int:
    """Close the queued and failed turns of deleted chats, or of one user, without extracting
    them; their texts are erased. Waits only for an extraction writing one of them at this
    moment (a short transaction, never an LLM call); one whose answer comes later finds the
    turn discarded and writes nothing.

    Returns:
        Turns discarded.
    """
    if not chat_ids and user_id is None:
        return 0
    where: list[ColumnElement[bool]] = [
        TurnRow.status.in_([TurnStatus.QUEUED.value, TurnStatus.FAILED.value])
    ]
    if chat_ids:
        where.append(TurnRow.chat_id.in_(list(chat_ids)))
    if user_id is not None:
        where.append(TurnRow.user_id == user_id)
    # rows locked in ascending id first, the order an extraction's write locks its batch in
    # (`lock_still_queued`): an UPDATE alone locks in scan order and could deadlock with it
    await session.execute(select(TurnRow.id).where(*where).order_by(TurnRow.id).with_for_update())
    stmt = update(TurnRow).where(*where)
    result = await session.execute(
        stmt.values(
            status=TurnStatus.DISCARDED.value,
            finished_at=datetime.now(UTC),
            payload=TurnRow.payload.op("-")("texts"),
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def chat_ids_in_folders(session: AsyncSession, *, folder_ids: Sequence[str]) -> list[str]:
    """Every chat a turn was handed over from while it was in one of these folders."""
    if not folder_ids:
        return []
    folder = TurnRow.payload["chat"]["folder_id"].astext
    stmt = select(TurnRow.chat_id).where(folder.in_(list(folder_ids))).distinct()
    return sorted(str(c) for c in (await session.execute(stmt)).scalars() if c)


async def private_to_another(session: AsyncSession, *, chat_id: str, user_id: str) -> bool:
    """True when the latest turn anyone but `user_id` handed over from `chat_id` came from a
    private chat: the chat was that user's alone then (one indexed read: the unique index
    on (chat_id, user_message_id) leads with chat_id).
    """
    collaborative: ColumnElement[str] = TurnRow.payload["chat"]["collaborative"].astext
    stmt = (
        select(collaborative)
        .where(TurnRow.chat_id == chat_id, TurnRow.user_id != user_id)
        .order_by(TurnRow.id.desc())
        .limit(1)
    )
    found = (await session.execute(stmt)).first()
    return found is not None and found[0] != "true"


def folder_of_turn() -> ColumnElement[str]:
    """The folder a turn was handed over from (`payload.chat.folder_id`; NULL outside a
    folder): the expression `ix_turns_folder` indexes (migration 0018).
    """
    # the keys written out, not bound: a prepared statement's generic plan must still see
    # the indexed expression
    return literal_column("((turns.payload -> 'chat') ->> 'folder_id')", String)


async def folder_private_to_another(session: AsyncSession, *, folder_id: str, user_id: str) -> bool:
    """True when the latest turn anyone but `user_id` handed over from a chat in `folder_id`
    came from a private chat: the folder was that user's alone then (a folder shared with
    others makes every chat in it collaborative, DESIGN §2). One indexed read backwards
    along `ix_turns_folder`.
    """
    collaborative: ColumnElement[str] = TurnRow.payload["chat"]["collaborative"].astext
    stmt = (
        select(collaborative)
        .where(folder_of_turn() == folder_id, TurnRow.user_id != user_id)
        .order_by(TurnRow.id.desc())
        .limit(1)
    )
    found = (await session.execute(stmt)).first()
    return found is not None and found[0] != "true"


async def chat_ids_of(session: AsyncSession, *, user_id: str) -> list[str]:
    """Every chat the user handed a turn over from."""
    stmt = select(TurnRow.chat_id).where(TurnRow.user_id == user_id).distinct()
    return sorted(str(c) for c in (await session.execute(stmt)).scalars() if c)


async def waiting(session: AsyncSession) -> list[tuple[int, str]]:
    """(newest turn id, sender id) per chat and sender with turns still waiting for
    extraction, oldest first.
    """
    newest = func.max(TurnRow.id)
    stmt = (
        select(newest, TurnRow.user_id)
        .where(TurnRow.status == TurnStatus.QUEUED.value)
        .group_by(TurnRow.chat_id, TurnRow.user_id)
        .order_by(newest)
    )
    return [(int(i), str(u)) for i, u in (await session.execute(stmt)).all()]


async def counts(session: AsyncSession) -> dict[str, int]:
    """Number of turns per status."""
    rows = await session.execute(select(TurnRow.status, func.count()).group_by(TurnRow.status))
    found = {status: int(n) for status, n in rows.all()}
    return {s.value: found.get(s.value, 0) for s in TurnStatus}


async def discard_waiting(session: AsyncSession, *, turn_ids: Sequence[int], reason: str) -> int:
    """Close queued turns as discarded, their texts erased, without waiting for any lock.

    A turn an extraction holds right now (row-locked) is skipped: that job decides.

    Returns:
        How many turns were discarded.
    """
    if not turn_ids:
        return 0
    free = (
        select(TurnRow.id)
        .where(TurnRow.id.in_(list(turn_ids)), TurnRow.status == TurnStatus.QUEUED.value)
        .with_for_update(skip_locked=True)
    )
    result = await session.execute(
        update(TurnRow)
        .where(TurnRow.id.in_(free.scalar_subquery()))
        .values(
            status=TurnStatus.DISCARDED.value,
            error=reason,
            finished_at=datetime.now(UTC),
            payload=TurnRow.payload.op("-")("texts"),
        )
    )
    return int(getattr(result, "rowcount", 0) or 0)
