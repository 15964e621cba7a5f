"""Manual memory management for one user: list, add, edit, forget (DESIGN §4, §9)."""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from service.core import banks, edit_merge, forget_guard, limits, safety
from service.core.records import Bank, Memory, OwnerKind, ReadScope, Scope, SourceKind, Status
from service.errors import EditConflict, InvalidInput, MemoryNotFound
from service.flows import chat_summary, planted_check
from service.flows import context as context_flow
from service.flows import profile as profile_flow
from service.flows import reminders as reminder_flow
from service.flows.runtime import Runtime
from service.storage import (
    audit,
    forget_guards,
    forgotten_texts,
    installation,
    memories,
    memory_search,
    profiles,
    turns,
    user_state,
)
from service.storage import consolidation as consolidation_store
from service.storage import imports as import_store
from service.storage import remember as remember_store


def owned_scope(
    user_id: str,
    *,
    folder_id: str | None = None,
    bank: Bank | None = None,
    assistant_id: str | None = None,
) -> ReadScope:
    """The cells a user manages: their Personal and Interaction Patterns banks, plus the
    Project Memory of `folder_id` when given (membership is checked by the filter), plus
    their memory for `assistant_id` when given.

    Raises:
        InvalidInput: the user and assistant ids are too long together.
    """
    try:
        cells = banks.user_cells(user_id, folder_id=folder_id, assistant_id=assistant_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
    if bank is not None:
        cells = [c for c in cells if c.bank is bank]
    return ReadScope(tuple(cells))


async def everything_of(rt: Runtime, *, user_id: str) -> ReadScope:
    """Every cell that is only `user_id`'s: Personal, Interaction Patterns and their memory
    for each assistant they have one for (user deletion, a full export).
    """
    async with rt.db.unit_of_work() as session:
        owners = await memories.assistant_owners(session, user_id=user_id)
    own = owned_scope(user_id)
    return ReadScope(
        own.scopes + tuple(c for o in owners for c in banks.owner_cells(OwnerKind.ASSISTANT, o))
    )


NOT_AN_INSTRUCTION = "memories hold facts, not instructions to the assistant"


async def _checked(rt: Runtime, content: str) -> str:
    """`_clean`, then the planted-instruction check (`flows/planted_check.py`).

    Raises:
        InvalidInput: as `_clean`, or a text that would act as a harmful instruction.
    """
    text = _clean(content)
    if await planted_check.refused(rt, text):
        raise InvalidInput(NOT_AN_INSTRUCTION)
    return text


def _clean(content: str) -> str:
    text = unicodedata.normalize("NFC", content).strip()
    if not text:
        raise InvalidInput("the memory text is empty")
    limits.check_fact(text)
    if safety.looks_like_instruction(text):
        raise InvalidInput(NOT_AN_INSTRUCTION)
    text = safety.redact_secrets(text)
    if safety.mostly_redacted(text):
        raise InvalidInput("that text is only a password, key or code; memories never keep those")
    return text


async def list_for_user(
    rt: Runtime,
    *,
    user_id: str,
    bank: Bank | None,
    folder_id: str | None,
    limit: int,
    offset: int,
    assistant_id: str | None = None,
) -> tuple[list[Memory], int]:
    """A page of the user's active memories, newest first, and the total."""
    scope = owned_scope(user_id, folder_id=folder_id, bank=bank, assistant_id=assistant_id)
    async with rt.db.unit_of_work() as session:
        return await memories.list_memories(
            session,
            scope=scope,
            limit=limit,
            offset=offset,
        )


async def keyword_search(rt: Runtime, *, scope: ReadScope, text: str, limit: int) -> list[Memory]:
    """Memories containing any of the `;`-separated phrases of `text`, most relevant first."""
    async with rt.db.unit_of_work() as session:
        found = await memory_search.phrase_search(
            session, scope=scope, phrases=memory_search.split_phrases(text), limit=limit
        )
    return [c.memory for c in found]


async def hybrid_search(rt: Runtime, *, scope: ReadScope, text: str, limit: int) -> list[Memory]:
    """The `limit` memories of `scope` that best match `text`, most relevant first.

    Text with `;` is a list of phrases (`keyword_search`); other text is ranked by the read
    path's own ranking (`flows.context.retrieve` with its relevance gate: fusion of meaning
    and keywords, recency, strength and diversity, core/ranking.py), so `/memory search`
    and the memory tool order memories as the injected block does.
    """
    if ";" in text:
        return await keyword_search(rt, scope=scope, text=text, limit=limit)
    ranked = await context_flow.retrieve(
        rt, scope=scope, query=text, now=datetime.now(UTC), limit=limit, apply_gate=True
    )
    return [r.memory for r in ranked]


async def export_for_user(rt: Runtime, *, user_id: str, folder_id: str | None) -> list[Memory]:
    """Everything of the user's that still has content, oldest first: their own banks, their
    memory for every assistant, and the Project Memory of `folder_id` when given.
    """
    scope = await everything_of(rt, user_id=user_id)
    if folder_id:
        scope = ReadScope((*scope.scopes, *banks.owner_cells(OwnerKind.FOLDER, folder_id)))
    async with rt.db.unit_of_work() as session:
        return await memories.export_rows(session, scope=scope)


async def get_for_user(
    rt: Runtime,
    *,
    user_id: str,
    memory_id: uuid.UUID,
    folder_id: str | None = None,
    assistant_id: str | None = None,
) -> Memory:
    """One active memory of the user. Raises MemoryNotFound."""
    scope = owned_scope(user_id, folder_id=folder_id, assistant_id=assistant_id)
    async with rt.db.unit_of_work() as session:
        found = await memories.get(session, scope=scope, memory_id=memory_id)
    if found is None:
        raise MemoryNotFound(f"no memory {memory_id} for this user")
    return found


async def add_for_user(
    rt: Runtime,
    *,
    user_id: str,
    content: str,
    bank: Bank,
    tags: Sequence[str],
    folder_id: str | None,
    assistant_id: str | None = None,
) -> Memory:
    """Store a memory the user wrote themselves (confidence 1.0).

    Raises:
        InvalidInput: empty or instruction-like text, a Project memory without a folder, an
            Assistant memory without its assistant.
    """
    try:
        cell = banks.outside_chat_cell(
            bank, user_id=user_id, folder_id=folder_id, assistant_id=assistant_id
        )
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
    return await add(rt, cell=cell, content=content, tags=tags, actor=f"user:{user_id}")


async def add(
    rt: Runtime,
    *,
    cell: Scope,
    content: str,
    tags: Sequence[str],
    actor: str,
    source_chat_id: str | None = None,
) -> Memory:
    """Store a memory written by a person into `cell` (confidence 1.0); audited.

    Raises:
        InvalidInput: empty, too long or instruction-like text; too many or too long tags.
    """
    text = await _checked(rt, content)
    tags = limits.check_tags(tags)
    vector = await rt.encoder.encode_one(text)
    now = datetime.now(UTC)
    async with rt.db.unit_of_work() as session:
        memory = await memories.insert(
            session,
            owner_kind=cell.owner_kind,
            owner_id=cell.owner_id,
            bank=cell.bank,
            content=text,
            tags=list(tags),
            confidence=1.0,
            source_kind=SourceKind.MANUAL,
            source_chat_id=source_chat_id,
            source_message_id=None,
            created_at=now,
            embedding=np.asarray(vector),
            embedding_model=rt.encoder.model_name,
        )
        await audit.record_created(session, memory, actor=actor, reason="added by the user")
    if cell.owner_kind is OwnerKind.USER:
        await profile_flow.request_refresh(rt, user_id=cell.owner_id)
    return memory


async def edit_for_user(
    rt: Runtime,
    *,
    user_id: str,
    memory_id: uuid.UUID,
    content: str | None,
    bank: Bank | None,
    tags: Sequence[str] | None,
    folder_id: str | None = None,
    assistant_id: str | None = None,
    version: int | None = None,
) -> Memory:
    """Change a memory's text, bank or tags.

    Args:
        version: the version the user saw (`MemoryRead.version`); None = the one stored when
            the request arrives.

    Raises:
        MemoryNotFound: not an active memory of the user.
        EditConflict: `version` is not the current one, or another edit meanwhile changed the
            same words (the sentence names the current text).
        InvalidInput: as `edit`.
    """
    scope = owned_scope(user_id, folder_id=folder_id, assistant_id=assistant_id)
    seen = None
    if version is not None:
        async with rt.db.reads() as session:
            seen = await memories.get(session, scope=scope, memory_id=memory_id)
        if seen is None:
            raise MemoryNotFound(f"no memory {memory_id} for this user")
        if seen.version != version:
            # the text of an older version is not kept, so nothing to merge with
            raise EditConflict(_changed_text(seen, version=version))
    return await edit(
        rt,
        scope=scope,
        memory_id=memory_id,
        content=content,
        bank=bank,
        tags=tags,
        actor=f"user:{user_id}",
        seen=seen,
    )


EDIT_ATTEMPTS = 3
"""Merges tried when other edits keep landing first (each one is a real concurrent edit)."""


def _changed_text(current: Memory, *, version: int | None = None) -> str:
    """The sentence of an EditConflict: what the memory reads now."""
    since = f"since version {version} " if version is not None else ""
    return (
        f"this memory was changed {since}by another edit at the same moment, so yours was not "
        f"applied; it now reads “{current.content}” (version {current.version}): edit that "
        "text again"
    )


async def edit(
    rt: Runtime,
    *,
    scope: ReadScope,
    memory_id: uuid.UUID,
    content: str | None,
    bank: Bank | None,
    tags: Sequence[str] | None,
    actor: str,
    seen: Memory | None = None,
) -> Memory:
    """Change a memory in `scope` in place (new version number); audited.

    A new text is written over the version the editor started from (`seen`, else the one
    stored when the edit starts). When another edit changed the memory meanwhile, the two
    are merged (`core/edit_merge.py`: both changes kept) and the merge is written instead;
    two changes of the same words are refused with EditConflict, whose sentence names the
    current text. Nothing is ever overwritten unseen (issue 27, item 6).

    Raises:
        MemoryNotFound: not an active memory of `scope`.
        EditConflict: another edit changed the same words at the same moment.
        InvalidInput: empty or instruction-like text, or a move between a user and a project.
    """
    if content is not None and seen is None:
        async with rt.db.reads() as session:
            seen = await memories.get(session, scope=scope, memory_id=memory_id)
        if seen is None:
            raise MemoryNotFound(f"no memory {memory_id} for this user")
    text = await _checked(rt, content) if content is not None else None
    tags = limits.check_tags(tags) if tags is not None else None
    current = seen
    for _ in range(EDIT_ATTEMPTS):
        vector = np.asarray(await rt.encoder.encode_one(text)) if text is not None else None
        after, current = await _write_edit(
            rt,
            scope=scope,
            memory_id=memory_id,
            changes=(text, bank, tags, vector),
            actor=actor,
            seen=seen,
        )
        if after is not None:
            break
        # changed meanwhile: our change on top of theirs, checked again as any new text
        assert text is not None and seen is not None and current is not None
        merged = edit_merge.merge(seen.content, text, current.content)
        if merged is None:
            raise EditConflict(_changed_text(current))
        text, seen = await _checked(rt, merged), current
    else:
        assert current is not None
        raise EditConflict(_changed_text(current))
    if after.owner_kind is OwnerKind.USER:
        await profile_flow.request_refresh(rt, user_id=after.owner_id)
    return after


async def _write_edit(
    rt: Runtime,
    *,
    scope: ReadScope,
    memory_id: uuid.UUID,
    changes: tuple[str | None, Bank | None, Sequence[str] | None, np.ndarray | None],
    actor: str,
    seen: Memory | None,
) -> tuple[Memory | None, Memory | None]:
    """One edit in one transaction: (the memory after it, None), or (None, the memory as it
    is now) when a new text was to be written over `seen` and another change came first.

    Raises:
        MemoryNotFound: not an active memory of `scope` (forgotten or replaced meanwhile).
        InvalidInput: a move between a user and a project.
    """
    text, bank, tags, vector = changes
    now = datetime.now(UTC)
    async with rt.db.unit_of_work() as session:
        # locked first: an extraction applying an answer at this moment replaces or archives
        # it either before (then it is not found) or after (then it sees the new version)
        await memories.lock_rows(session, memory_ids=[memory_id])
        before = await memories.get(session, scope=scope, memory_id=memory_id)
        if before is None:
            raise MemoryNotFound(f"no memory {memory_id} for this user")
        if bank is not None and bank.owner_kind is not before.bank.owner_kind:
            raise InvalidInput("a memory can only move between a user's own two banks")
        if (
            text is not None
            and seen is not None
            and before.version != seen.version
            and before.content != seen.content
        ):
            return None, before
        await memories.update_fields(
            session,
            memory_id=memory_id,
            at=now,
            content=text,
            bank=bank,
            tags=tags,
            embedding=vector,
            embedding_model=rt.encoder.model_name,
        )
        after = await memories.get(
            session,
            scope=ReadScope(tuple(Scope(before.owner_kind, before.owner_id, b) for b in Bank)),
            memory_id=memory_id,
        )
        assert after is not None
        await audit.record(
            session,
            memory_id=memory_id,
            owner_id=before.owner_id,
            actor=actor,
            action="update",
            reason="edited by the user",
            before=audit.snapshot(before),
            after=audit.snapshot(after),
        )
    return after, None


async def forget_for_user(
    rt: Runtime,
    *,
    user_id: str,
    memory_id: uuid.UUID,
    folder_id: str | None = None,
    assistant_id: str | None = None,
) -> int:
    """Forget one of the user's memories (see `forget`). Raises MemoryNotFound."""
    return await forget(
        rt,
        scope=owned_scope(user_id, folder_id=folder_id, assistant_id=assistant_id),
        memory_id=memory_id,
        actor=f"user:{user_id}",
    )


async def forget_chat(rt: Runtime, *, chat_ids: Sequence[str], actor: str) -> int:
    """Forget every Chat Memory of deleted chats (content-free tombstones stay).

    Returns:
        Number of memories forgotten.
    """
    if not chat_ids:
        return 0
    scope = ReadScope(
        tuple(cell for c in chat_ids for cell in banks.owner_cells(OwnerKind.CHAT, c))
    )
    async with rt.db.unit_of_work() as session:
        # turns still waiting are never extracted: nothing is written for a gone chat
        await turns.discard(session, chat_ids=chat_ids)
        # nor by a "Remember this" click or an import preview whose LLM call is running,
        # nor by an import preview pasted there and waiting for its code
        await remember_store.discard(session, reason="chat_deleted", chat_ids=chat_ids)
        await import_store.discard_pending_from_chats(session, chat_ids=chat_ids)
    async with rt.db.unit_of_work() as session:
        # texts kept for the chats' summaries go now, so no summary is written for a gone chat
        await chat_summary.erase_uncovered(session, chat_ids=chat_ids)
        rows = await memories.records_of(session, scope=scope)
    return await forget_all_of(rt, scope=scope, rows=rows, actor=actor)


async def forget_chats_of_user(rt: Runtime, *, user_id: str, actor: str) -> int:
    """Forget the Chat Memory of every chat the user handed turns over from or wrote to."""
    async with rt.db.unit_of_work() as session:
        chat_ids = set(await turns.chat_ids_of(session, user_id=user_id))
        chat_ids.update(await audit.chats_written_by(session, actor=f"user:{user_id}"))
    return await forget_chat(rt, chat_ids=sorted(chat_ids), actor=actor)


async def forget_folders(
    rt: Runtime, *, folder_ids: Sequence[str], with_chats: bool, actor: str
) -> int:
    """Folders were deleted in Open WebUI: forget their Project Memory and, when their chats
    were deleted with them (`with_chats`), those chats' Chat Memory.

    A deleted folder's id never comes back, so its Project Memory could never be read again;
    its chats are known from the turns handed over while they were in the folder.

    Returns:
        Number of memories forgotten.
    """
    if not folder_ids:
        return 0
    scope = ReadScope(
        tuple(cell for f in folder_ids for cell in banks.owner_cells(OwnerKind.FOLDER, f))
    )
    async with rt.db.unit_of_work() as session:
        chat_ids = await turns.chat_ids_in_folders(session, folder_ids=folder_ids)
        if with_chats:
            await turns.discard(session, chat_ids=chat_ids)
        rows = await memories.records_of(session, scope=scope)
    count = await forget_all_of(rt, scope=scope, rows=rows, actor=actor)
    if with_chats:
        count += await forget_chat(rt, chat_ids=chat_ids, actor=actor)
    return count


async def forget_user(rt: Runtime, *, user_id: str, actor: str) -> int:
    """A user account was deleted: forget everything that was only theirs.

    Their Personal and Interaction Patterns memories, their memory for every assistant and
    the Chat Memory of their chats are forgotten (content-free tombstones stay), their
    reminders cancelled; their profiles, switches and injection records are deleted. Project
    Memory belongs to its folder and stays.

    Returns:
        Number of memories forgotten.
    """
    async with rt.db.unit_of_work() as session:
        # first, so an extraction running now finishes before its memories are looked up
        await turns.discard(session, user_id=user_id)
        await remember_store.discard(session, reason="user_deleted", user_id=user_id)
    own = await everything_of(rt, user_id=user_id)
    async with rt.db.unit_of_work() as session:
        rows = await memories.records_of(session, scope=own)
    count = await forget_all_of(rt, scope=own, rows=rows, actor=actor)
    count += await forget_chats_of_user(rt, user_id=user_id, actor=actor)
    await reminder_flow.cancel_all(rt, user_id=user_id)
    async with rt.db.unit_of_work() as session:
        await profiles.remove_user(session, user_id=user_id)
        await user_state.remove_user(session, user_id=user_id)
        await import_store.discard_pending(session, user_id=user_id)
        await forgotten_texts.remove_user(session, user_id=user_id)
    profile_flow.drop_cached(user_id)
    return count


FORGET_BATCH = 500
"""Memories forgotten per transaction by a bulk forget (forget all, a deleted chat, folder
or user): a few set-based statements per batch, so 5,000 memories are ten short
transactions, not 5,000."""


async def forget_all_of(
    rt: Runtime, *, scope: ReadScope, rows: Sequence[Memory], actor: str
) -> int:
    """Forget each of `rows` as `forget` does, FORGET_BATCH at a time (`forget_many`);
    returns how many were forgotten now (a row already forgotten as part of another
    memory's history is skipped).
    """
    count = 0
    ids = [m.id for m in rows]
    for start in range(0, len(ids), FORGET_BATCH):
        count += await forget_many(
            rt, scope=scope, memory_ids=ids[start : start + FORGET_BATCH], actor=actor
        )
    return count


LIVE = (Status.ACTIVE, Status.ARCHIVED, Status.SUPERSEDED)


async def forget_many(
    rt: Runtime, *, scope: ReadScope, memory_ids: Sequence[uuid.UUID], actor: str
) -> int:
    """`forget` of many memories in one transaction of set-based statements, with every side
    effect of `forget`: guards for the turns still waiting, the chats' summaries withdrawn,
    summaries repeating them undone, tombstones, the audit trail scrubbed, profiles withdrawn,
    one "forget" event per memory, caches dropped.

    Returns:
        How many of `memory_ids` were forgotten now (ids not found in `scope`, or already
        forgotten with a later version, are skipped).
    """
    now = datetime.now(UTC)
    async with rt.db.unit_of_work() as session:
        found = await memories.get_many(session, scope=scope, memory_ids=memory_ids, statuses=LIVE)
        if not found:
            return 0
        # the lock order of `forget`: waiting turns, then memory rows in ascending seq
        waiting = await forget_guards.lock_open_turns(
            session, owners=[(m.owner_kind, m.owner_id) for m in found]
        )
        chain = await memories.history_chains(session, memory_ids=[m.id for m in found])
        versions = await memories.get_many(session, scope=scope, memory_ids=chain, statuses=LIVE)
        chain += await chat_summary.withdraw_for_forgotten(session, forgotten=versions)
        summaries = await consolidation_store.summaries_containing_any(
            session, scope=scope, memory_ids=chain
        )
        await consolidation_store.restore_sources_of_many(
            session, scope=scope, summary_ids=[m.id for m in summaries], at=now
        )
        chain = list(dict.fromkeys([*chain, *(m.id for m in summaries)]))
        if waiting:
            key = await installation.secret(session, forget_guard.SECRET_NAME)
            await forget_guards.add(
                session,
                turn_ids=waiting,
                memories=[(v.id, forget_guard.fingerprint(v.content, key)) for v in versions],
            )
        await memories.lock_rows(session, memory_ids=chain)
        await memories.tombstone(session, memory_ids=chain, at=now)
        await audit.scrub(session, memory_ids=chain)
        withdrawn = await profiles.withdraw_using(session, memory_ids=chain)
        await audit.record_many(
            session,
            [
                {
                    "memory_id": m.id,
                    "owner_id": m.owner_id,
                    "actor": actor,
                    "action": "forget",
                    "reason": "forgotten by the user",
                    "before": None,
                    "after": None,
                }
                for m in found
            ],
        )
    for forgotten in chain:
        rt.relevance_cache.forget(forgotten)
    for user_id in withdrawn:
        profile_flow.drop_cached(user_id)
        await profile_flow.request_refresh(rt, user_id=user_id)
    return len(found)


async def forget(rt: Runtime, *, scope: ReadScope, memory_id: uuid.UUID, actor: str) -> int:
    """Forget a memory, every earlier and later version of it (supersede history) everywhere:
    content, vector, full text and audit payloads are removed; a content-free tombstone stays.

    Returns:
        Number of rows tombstoned (the memory and its history).

    Raises:
        MemoryNotFound: when the memory is not the user's or is already forgotten.
    """
    now = datetime.now(UTC)
    async with rt.db.unit_of_work() as session:
        found = await memories.get(
            session,
            scope=scope,
            memory_id=memory_id,
            statuses=(Status.ACTIVE, Status.ARCHIVED, Status.SUPERSEDED),
        )
        if found is None:
            raise MemoryNotFound(f"no memory {memory_id} for this user")
        # Turns accepted before this forget and not extracted yet were never shown it, yet
        # may say it again: they get guards below. Their rows are locked first, before any
        # memory row (restored sources, the chain), in the order every writer takes them.
        waiting = await forget_guards.lock_open_turns(
            session, owners=[(found.owner_kind, found.owner_id)]
        )
        # Forgetting any version forgets the fact: the chain is read from its newest
        # version, so an id an extraction has just replaced takes its successor with it.
        newest = await memories.newest_version(session, memory_id=memory_id)
        chain = await memories.history_chain(session, memory_id=newest)
        versions = [
            m
            for i in chain
            if (
                m := await memories.get(
                    session,
                    scope=scope,
                    memory_id=i,
                    statuses=(Status.ACTIVE, Status.ARCHIVED, Status.SUPERSEDED),
                )
            )
            is not None
        ]
        # So does the rolling summary of a chat that took in the memory's message.
        chain += await chat_summary.withdraw_for_forgotten(session, forgotten=versions)
        # A summary that repeats a forgotten memory goes too; its other sources come back.
        for source in list(chain):
            for summary in await consolidation_store.summaries_containing(
                session, scope=scope, memory_id=source
            ):
                await consolidation_store.restore_sources(
                    session, scope=scope, summary_id=summary.id, at=now
                )
                chain.append(summary.id)
        chain = list(dict.fromkeys(chain))
        # a user's own memory leaves a keyed digest of its text, so an import of Open WebUI's
        # memories does not bring it back unasked (no text is kept)
        own = [v for v in versions if v.owner_kind is OwnerKind.USER and v.content]
        if own:
            key = await installation.secret(session, forget_guard.SECRET_NAME)
            await forgotten_texts.add(
                session,
                user_id=own[0].owner_id,
                digests=[forget_guard.text_digest(v.content, key) for v in own],
            )
        if waiting:  # each gets the fingerprints of the memory and its earlier versions
            key = await installation.secret(session, forget_guard.SECRET_NAME)
            await forget_guards.add(
                session,
                turn_ids=waiting,
                memories=[(v.id, forget_guard.fingerprint(v.content, key)) for v in versions],
            )
        # Row locks in ascending seq, as every writer takes them (an extraction applying an
        # answer locks its shown memories the same way): whichever commits second sees the
        # other's change. An operation decided on one of these rows is then dropped.
        await memories.lock_rows(session, memory_ids=chain)
        # a version written while this waited for the locks is forgotten with the others
        while (latest := await memories.newest_version(session, memory_id=newest)) != newest:
            newest = latest
            later = await memories.history_chain(session, memory_id=latest)
            chain = list(dict.fromkeys(chain + later))
            await memories.lock_rows(session, memory_ids=chain)
        await memories.tombstone(session, memory_ids=chain, at=now)
        await audit.scrub(session, memory_ids=chain)
        # A profile written from a forgotten memory is withdrawn in the same transaction.
        withdrawn = await profiles.withdraw_using(session, memory_ids=chain)
        await audit.record(
            session,
            memory_id=memory_id,
            owner_id=found.owner_id,
            actor=actor,
            action="forget",
            reason="forgotten by the user",
        )
    for forgotten in chain:
        rt.relevance_cache.forget(forgotten)
    for user_id in withdrawn:
        profile_flow.drop_cached(user_id)
        await profile_flow.request_refresh(rt, user_id=user_id)
    return len(chain)
