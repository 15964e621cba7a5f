"""Run a `/memory …` command for one chat and return the exact text to show (DESIGN §9).

Every command sees only what the chat may see (DESIGN §3): in a shared chat the Personal
bank is neither listed nor changed. No LLM is involved, except by `/memory import` of
free text (service/flows/import_command.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import json
from datetime import UTC, datetime

from cachetools import TTLCache
from sqlalchemy.ext.asyncio import AsyncSession

from service.core import assistants, banks, limits, person, privacy, safety
from service.core import commands as text
from service.core import reminders as reminder_policy
from service.core.commands import Command, CommandName
from service.core.records import (
    Bank,
    ChatContext,
    Memory,
    OwnerKind,
    ReadScope,
    Scope,
    SourceKind,
    Status,
)
from service.errors import InvalidInput, MemoryNotFound
from service.flows import context as context_flow
from service.flows import import_command
from service.flows import imports as import_flow
from service.flows import memories as memory_flow
from service.flows import profile as profile_flow
from service.flows import reminders as reminder_flow
from service.flows.runtime import Runtime
from service.storage import imports as import_store
from service.storage import memories, turns, user_state
from service.storage import remember as remember_store

LIST_LIMIT = 50
SEARCH_LIMIT = 10


async def run_command(
    rt: Runtime, *, chat: ChatContext, command_text: str, now: datetime | None = None
) -> tuple[str, str]:
    """Execute a typed command.

    Args:
        now: when it was typed (the turn's time); None = the server clock.

    Returns:
        (command name or "unknown", Markdown text to show the user verbatim).
    """
    try:
        limits.check_command(command_text)
    except InvalidInput as exc:
        return "unknown", f"That didn't work: {text.escape_markdown(str(exc))}."
    command = dataclasses.replace(text.parse(command_text), at=now)
    if command.name is None:
        return "unknown", text.unknown_command_text(command.word)
    scope = privacy.read_scope(chat)
    if not privacy.takes_commands(chat):
        return command.name.value, "Memory commands work in chats only."
    handler = _HANDLERS[command.name]
    try:
        answer = await handler(rt, chat, scope, command)
    except InvalidInput as exc:
        answer = f"That didn't work: {text.escape_markdown(str(exc))}."
    return command.name.value, answer


async def _help(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    return text.HELP_TEXT


async def _list(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    bank = None
    if command.args:
        try:
            bank = Bank.parse(command.args)
        except ValueError as exc:
            return f"{text.escape_markdown(str(exc))}."
        scope = ReadScope(tuple(s for s in scope.scopes if s.bank is bank))
    async with rt.db.unit_of_work() as session:
        items, total = await memories.list_memories(
            session, scope=scope, limit=LIST_LIMIT, offset=0
        )
    where = f" in {bank.label}" if bank else ""
    if not items:
        return f"I don't remember anything{where} that this chat may see.{_hidden_note(chat)}"
    shown = f"{total}" if total <= len(items) else f"{len(items)} newest of {total}"
    lines = "\n".join(text.memory_line(m) for m in items)
    title = _assistant_title(chat) or f"Memories{where}"
    return f"**{title}** ({shown}):\n\n{lines}{_hidden_note(chat)}"


def _assistant_title(chat: ChatContext) -> str | None:
    """The label "Assistant Memory of Coding Helper" in a chat with an assistant that has its own
    memory (escaped for Markdown), else None.
    """
    if not chat.assistant_id:
        return None
    return text.escape_markdown(assistants.label(chat.assistant_id, chat.assistant_name))


def _hidden_note(chat: ChatContext) -> str:
    if chat.assistant_id:
        name = text.escape_markdown(chat.assistant_name or chat.assistant_id)
        shared = " In a shared chat, not even that is used." if chat.collaborative else ""
        return (
            f"\n\n{name} keeps its own memory: only what you told it is used in its chats, "
            f"never your Personal, Interaction Patterns, Project or Chat Memory.{shared}"
        )
    if chat.collaborative:
        return "\n\nPersonal memories are never shown in a shared chat."
    return ""


async def _search(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    query = command.args
    if not query:
        return (
            "What should I look for? Example: `/memory search bike` or `/memory search bike; Sam`"
        )
    found = await memory_flow.hybrid_search(rt, scope=scope, text=query, limit=SEARCH_LIMIT)
    return _search_answer(chat, query, found)


def _search_answer(chat: ChatContext, query: str, found: list[Memory]) -> str:
    if not found:
        return f"No memory matches “{text.escape_markdown(query)}”.{_hidden_note(chat)}"
    lines = "\n".join(text.memory_line(m) for m in found)
    return f"**Memories matching “{text.escape_markdown(query)}”** ({len(found)}):\n\n{lines}"


def _writable_cell(chat: ChatContext, bank: Bank) -> Scope:
    cell = privacy.command_write_scope(chat).scope_for(bank)
    if cell is None:
        raise InvalidInput(privacy.command_refusal(chat, bank))
    return cell


def _bank_label(chat: ChatContext, bank: Bank) -> str:
    """Name the bank as users read it.

    "Assistant Memory of Coding Helper" for the exclusive bank in its chat, else the bank's label.
    """
    return (_assistant_title(chat) if banks.spec(bank).exclusive else None) or bank.label


async def _add(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    try:
        bank, content = text.split_bank_prefix(command.args)
    except ValueError as exc:  # `Projcet: …`: saved to Personal without a word, before
        return f"{text.escape_markdown(str(exc))}. Nothing was saved."
    if not content:
        return "What should I remember? Example: `/memory add I keep bees`"
    content = person.third_person(content)  # injected under "I recall…": "I" is the assistant
    if bank is None:
        bank = privacy.default_bank(chat, privacy.command_write_scope(chat))
    cell = _writable_cell(chat, bank)
    memory = await memory_flow.add(
        rt,
        cell=cell,
        content=content,
        tags=(),
        actor=f"user:{chat.user_id}",
        source_chat_id=chat.chat_id,
    )
    return f"Remembered in {_bank_label(chat, bank)}:\n\n{text.memory_line(memory)}"


async def _find(
    rt: Runtime, scope: ReadScope, token: str, statuses: tuple[Status, ...] = (Status.ACTIVE,)
) -> Memory:
    seq = text.parse_id(token)
    if seq is None:
        raise InvalidInput(f"“{token}” is not a memory id; ids are the codes shown by list")
    async with rt.db.unit_of_work() as session:
        found = await memories.get_by_seq(session, scope=scope, seq=seq, statuses=statuses)
    if found is None:
        raise InvalidInput(f"there is no memory {token.strip().lstrip('#')} that this chat may see")
    return found


async def _edit(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    token, _, content = command.args.partition(" ")
    if not token or not content.strip():
        return "Usage: `/memory edit <id> <new text>`"
    found = await _find(rt, scope, token)
    _writable_cell(chat, found.bank)
    memory = await memory_flow.edit(
        rt,
        scope=scope,
        memory_id=found.id,
        content=person.third_person(content.strip()),
        bank=None,
        tags=None,
        actor=f"user:{chat.user_id}",
        seen=found,  # a change made meanwhile is merged with this one, never overwritten
    )
    return f"Changed:\n\n{text.memory_line(memory)}"


async def _assign_bank(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    token, _, bank_text = command.args.partition(" ")
    if not token or not bank_text.strip():
        return "Usage: `/memory assign_bank <id> <bank>` (personal, interaction_patterns, project)"
    try:
        bank = Bank.parse(bank_text)
    except ValueError as exc:
        return f"{text.escape_markdown(str(exc))}."
    found = await _find(rt, scope, token)
    _writable_cell(chat, found.bank)
    _writable_cell(chat, bank)
    if bank.owner_kind is not found.bank.owner_kind:
        raise InvalidInput("a memory can only move between your own two banks")
    memory = await memory_flow.edit(
        rt,
        scope=scope,
        memory_id=found.id,
        content=None,
        bank=bank,
        tags=None,
        actor=f"user:{chat.user_id}",
    )
    return f"Moved to {bank.label}:\n\n{text.memory_line(memory)}"


def _confirmation_code(rt: Runtime, user_id: str, memory_ids: list[int]) -> str:
    """Six hex digits that change whenever the set of memories changes."""
    key = rt.settings.bearer_key().encode()
    message = f"{user_id}:{','.join(map(str, memory_ids))}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:6]


async def _forget(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    token, _, rest = command.args.partition(" ")
    if not token:
        return "Usage: `/memory forget <id>` or `/memory forget all`"
    if token.lower() == "all":
        return await _forget_all(rt, chat, code=rest.strip())
    if reminder_policy.parse_reminder_code(token) is not None:
        return await reminder_flow.forget_command(rt, chat=chat, token=token)
    found = await _find(
        rt, scope, token, statuses=(Status.ACTIVE, Status.ARCHIVED, Status.SUPERSEDED)
    )
    try:
        await memory_flow.forget(rt, scope=scope, memory_id=found.id, actor=f"user:{chat.user_id}")
    except MemoryNotFound as exc:  # forgotten meanwhile
        raise InvalidInput(str(exc)) from exc
    return (
        f"Forgotten `{text.short_id(found)}` everywhere. Only a note without its content is kept."
    )


FORGET_ALL_RESULT_S = 600.0
"""How long a confirmed forget all's answer is kept for the same code (seconds): the filter
or the user retrying a command whose answer was lost gets that answer again, not "not the
confirmation code" from a set of memories the first run already changed."""

#: (user, chat's assistant, code) → the confirmed forget all running or done in this process
_confirmed_forget_all: TTLCache[tuple[str, str, str], asyncio.Task[str]] = TTLCache(
    maxsize=10_000, ttl=FORGET_ALL_RESULT_S
)


async def _forget_all(rt: Runtime, chat: ChatContext, *, code: str) -> str:
    if not privacy.takes_whole_memory_commands(chat):
        raise InvalidInput("forget all works in a private chat only")
    key = (chat.user_id, chat.assistant_id or "", code)
    earlier = _confirmed_forget_all.get(key) if code else None
    if earlier is not None and earlier.get_loop() is asyncio.get_running_loop():
        # a retry of a confirmation that runs or ran: its answer, however long it takes
        return await asyncio.shield(earlier)
    assistant = privacy.assistant_cell(chat)
    # with an assistant that has its own memory: that memory only (and no reminders, which
    # are personal); elsewhere the user's own two banks, never an assistant's
    own = ReadScope((assistant,)) if assistant else memory_flow.owned_scope(chat.user_id)
    async with rt.db.unit_of_work() as session:
        rows = await memories.records_of(session, scope=own)
    reminders = [] if assistant else await reminder_flow.list_for_user(rt, user_id=chat.user_id)
    if not rows and not reminders:
        # nothing stored yet, but what the user said may still wait to be read: it goes,
        # or it would be remembered right after "forget all" (no code: nothing stored is lost)
        async with rt.db.unit_of_work() as session:
            waiting = await turns.discard(session, user_id=chat.user_id)
            await import_store.discard_pending(session, user_id=chat.user_id)
            await remember_store.discard(session, reason="forget_all", user_id=chat.user_id)
        if not waiting:
            return "There is nothing to forget."
        said = text.counted(waiting, "message", "messages")
        return (
            f"No memory was stored yet. The {said} not yet read for memories "
            f"{'was' if waiting == 1 else 'were'} discarded, so nothing from "
            f"{'it' if waiting == 1 else 'them'} will be remembered."
        )
    expected = _confirmation_code(
        rt, chat.user_id, [m.seq for m in rows] + [-r.seq for r in reminders]
    )
    also = f" and your {text.counted(len(reminders), 'reminder', 'reminders')}" if reminders else ""
    if code != expected:
        wrong = (
            f"`{text.escape_markdown(code)}` is not the confirmation code (a code is only good "
            "until your memories change), so nothing was forgotten. "
            if code
            else ""
        )
        banks = _assistant_title(chat) if assistant else "Personal and Interaction Patterns"
        what = (
            f"your only memory in {banks}"
            if assistant and len(rows) == 1
            else f"all {len(rows)} of your memories in {banks}"
            if assistant
            else "your only Personal or Interaction Patterns memory"
            if len(rows) == 1
            else f"all {len(rows)} of your {banks} memories"
        )
        return (
            f"{wrong}This forgets {what}{also}, for good. To confirm, type:\n\n"
            f"`/memory forget all {expected}`"
        )
    # the run goes on if the request is dropped (the filter gave up waiting); a retry with the
    # same code waits for it and gets its answer
    task = asyncio.ensure_future(_forget_all_confirmed(rt, chat, own=own, assistant=assistant))
    _confirmed_forget_all[key] = task

    def failed_runs_may_run_again(done: asyncio.Task[str]) -> None:
        if done.cancelled() or done.exception() is not None:
            _confirmed_forget_all.pop(key, None)

    task.add_done_callback(failed_runs_may_run_again)
    return await asyncio.shield(task)


async def _forget_all_confirmed(
    rt: Runtime, chat: ChatContext, *, own: ReadScope, assistant: Scope | None
) -> str:
    async with rt.db.unit_of_work() as session:
        # what the user said but was not extracted yet is forgotten too; then the memories an
        # extraction finishing meanwhile wrote are read with the rest
        await turns.discard(session, user_id=chat.user_id)
        await import_store.discard_pending(session, user_id=chat.user_id)
        await remember_store.discard(session, reason="forget_all", user_id=chat.user_id)
    async with rt.db.unit_of_work() as session:
        rows = await memories.records_of(session, scope=own)
    await memory_flow.forget_all_of(rt, scope=own, rows=rows, actor=f"user:{chat.user_id}")
    forgot = f"Forgot {'' if len(rows) == 1 else 'all '}"
    if assistant:
        return (
            f"{forgot}{text.counted(len(rows), 'memory', 'memories')} of {_assistant_title(chat)}. "
            "Your other memories were kept."
        )
    cancelled = await reminder_flow.cancel_all(rt, user_id=chat.user_id)
    also = f" and {text.counted(cancelled, 'reminder', 'reminders')}" if cancelled else ""
    return (
        f"{forgot}{text.counted(len(rows), 'memory', 'memories')}{also}. "
        "Project memories of shared folders were kept."
    )


async def _banks(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    writable = privacy.write_scope(chat)
    by_command = privacy.command_write_scope(chat)
    hidden = privacy.hidden_own_cells(chat)
    lines = []
    async with rt.db.unit_of_work() as session:
        for row in banks.rows():
            if not row.listed:
                continue
            bank = row.bank
            cells = ReadScope(tuple(s for s in scope.scopes if s.bank is bank))
            if row.exclusive and not cells:
                lines.append(await _other_assistants_line(session, chat, row))
                continue
            # a hidden bank still names how much the sender keeps there (its true count),
            # except where others see the answer
            counted = cells or ReadScope(tuple(s for s in hidden.scopes if s.bank is bank))
            count = (
                await memories.count_active(session, scope=counted)
                if counted
                else None
                if chat.collaborative
                else 0
            )
            read = "read" if cells else "hidden here"
            write = (
                "write"
                if writable.scope_for(bank)
                else "changed by your commands only"
                if by_command.scope_for(bank)
                else "no writing here"
            )
            label = _bank_label(chat, bank)
            if count is None:
                lines.append(f"- **{label}**: {read}, {write}")
            else:
                counts = text.counted(count, "memory", "memories")
                lines.append(f"- **{label}**: {counts} — {read}, {write}")
    return "**Memory banks** in this chat:\n\n" + "\n".join(lines) + _hidden_note(chat)


async def _other_assistants_line(
    session: AsyncSession, chat: ChatContext, row: banks.BankSpec
) -> str:
    """The Assistant Memory line of `/memory banks` outside an assistant's chat: how many
    memories the sender keeps with which assistants (counts and ids, never contents), in a
    private chat only.
    """
    if chat.collaborative or chat.assistant_id or not chat.user_id:
        return f"- **{row.label}**: hidden here"
    found = []
    for owner in await memories.assistant_owners(session, user_id=chat.user_id):
        cell = ReadScope((Scope(row.owner_kind, owner, row.bank),))
        count = await memories.count_active(session, scope=cell)
        parsed = assistants.parse_owner(owner)
        if count and parsed:
            found.append(f"{text.escape_markdown(parsed[1])} ({count})")
    kept = f"kept with {', '.join(found)}" if found else "none yet"
    return (
        f"- **{row.label}**: {kept} — hidden here, read and written only in "
        "chats with that assistant"
    )


async def _profile(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    written = (
        await profile_flow.profile_for(rt, user_id=chat.user_id, collaborative=chat.collaborative)
        if privacy.uses_profile(chat)
        else None  # an assistant with its own memory never gets the profile
    )
    if written:
        return (
            f"**Your core profile** (sent with every message in this chat):\n\n"
            f"{text.escape_markdown(written)}"
        )
    async with rt.db.unit_of_work() as session:
        core = await memories.core_memories(session, scope=scope, limit=rt.settings.core_max_items)
    if not core:
        return "No core memories yet."
    lines = "\n".join(text.memory_line(m) for m in core)
    return f"**Core memories** (sent with every message in this chat):\n\n{lines}"


async def _why(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    await context_flow.use_recorded(chat)  # the last reply's record may still be on its way
    async with rt.db.unit_of_work() as session:
        last = await user_state.last_injection(session, user_id=chat.user_id, chat_id=chat.chat_id)
        if last is None or not last[1]:
            return "No memories went into a reply in this chat yet."
        at, items = last
        lines = []
        for item in items:
            found = await memories.get_by_seq(
                session,
                scope=scope,
                seq=int(item["seq"]),
                statuses=(Status.ACTIVE, Status.SUPERSEDED, Status.ARCHIVED),
            )
            numbers = (
                "core profile, sent with every message"
                if _is_profile_item(item)
                else f"similarity {item['similarity']:.2f}, score {item['score']:.2f}"
            )
            if found is not None:
                numbers += f", confidence {found.confidence:.2f}, {_PROVENANCE[found.source_kind]}"
            if found is None:
                lines.append(
                    f"- `{text.encode_id(int(item['seq']))}` (forgotten or not "
                    f"visible here) — {numbers}"
                )
            else:
                lines.append(text.memory_line(found, extra=numbers))
    return (
        f"**Memories used for this chat's last reply** ({at:%Y-%m-%d %H:%M} UTC):\n\n"
        + "\n".join(lines)
    )


def _is_profile_item(item: dict[str, object]) -> bool:
    """A core memory sent whatever the message: flagged, or recorded without numbers
    (ranking.split_core gives a core memory that was not retrieved similarity 0, score 0).
    """
    if item.get("profile") is True:
        return True
    return item.get("similarity") == 0 and item.get("score") == 0


async def _export(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    async with rt.db.unit_of_work() as session:
        rows = await memories.records_of(session, scope=scope)
    if command.args.lower() in ("markdown", "md"):
        return import_flow.export_markdown(rows)
    data = export_json(rows)
    answer = (
        f"**Your memories** ({len(rows)}) as JSON:\n\n```json\n"
        f"{json.dumps(data, ensure_ascii=False, indent=2)}\n```"
    )
    if not reminder_policy.may_list(chat):
        return answer
    reminders = reminder_policy.export_json(
        await reminder_flow.list_for_user(rt, user_id=chat.user_id)
    )
    if reminders:
        answer += (
            f"\n\n**Your reminders** ({len(reminders)}) as JSON:\n\n```json\n"
            f"{json.dumps(reminders, ensure_ascii=False, indent=2)}\n```"
        )
    return answer


def export_json(rows: list[Memory]) -> list[dict[str, object]]:
    """Memories as plain JSON objects (the export format of the API and `/memory export`;
    read back by service/core/imports.py `parse_export`).
    """
    return [
        {
            "id": text.encode_id(m.seq),
            "uuid": str(m.id),
            "bank": m.bank.value,
            # a row written before today's rules is redacted on its way out too
            "content": safety.redact_secrets(m.content),
            "tags": list(m.tags),
            "confidence": m.confidence,
            "status": m.status.value,
            "source": m.source_kind.value,
            "source_chat_id": m.source_chat_id,
            "source_message_id": m.source_message_id,
            "folder_id": m.owner_id if m.owner_kind is OwnerKind.FOLDER else None,
            "assistant_id": _assistant_id_of(m),
            "created_at": m.created_at.isoformat(),
            "updated_at": m.updated_at.isoformat(),
        }
        for m in rows
    ]


def _assistant_id_of(memory: Memory) -> str | None:
    return banks.owner_ids(Scope(memory.owner_kind, memory.owner_id, memory.bank))[1]


async def _import(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    return await import_command.run(rt, chat, command.args, now=command.at)


async def _reminders(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    return await reminder_flow.list_command(rt, chat=chat, now=command.at)


async def _pause(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    async with rt.db.unit_of_work() as session:
        await user_state.set_paused(
            session, user_id=chat.user_id, paused=True, at=datetime.now(UTC)
        )
    return (
        "Paused: I won't learn anything new from your chats until you type "
        "`/memory resume`. What I already remember is still used."
    )


async def _resume(rt: Runtime, chat: ChatContext, scope: ReadScope, command: Command) -> str:
    async with rt.db.unit_of_work() as session:
        await user_state.set_paused(
            session, user_id=chat.user_id, paused=False, at=datetime.now(UTC)
        )
    return "Resumed: I learn from your chats again."


_PROVENANCE = {
    SourceKind.EXTRACTION: "stated by the user in a chat",
    SourceKind.INFERENCE: "inferred from a chat",
    SourceKind.MANUAL: "added by hand",
    SourceKind.SUMMARY: "summary of older memories",
    SourceKind.CHAT_SUMMARY: "summary of this chat",
}

_HANDLERS = {
    CommandName.HELP: _help,
    CommandName.LIST: _list,
    CommandName.SEARCH: _search,
    CommandName.ADD: _add,
    CommandName.EDIT: _edit,
    CommandName.FORGET: _forget,
    CommandName.ASSIGN_BANK: _assign_bank,
    CommandName.BANKS: _banks,
    CommandName.PROFILE: _profile,
    CommandName.WHY: _why,
    CommandName.EXPORT: _export,
    CommandName.PAUSE: _pause,
    CommandName.RESUME: _resume,
    CommandName.REMINDERS: _reminders,
    CommandName.IMPORT: _import,
}
