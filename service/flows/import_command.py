"""`/memory import …`: pasted text or a pasted JSON export, shown first, written only after
the user types the confirmation code (like `/memory forget all`).

- `/memory import <text>`: one fact a line (a `bank:` prefix picks the bank, as for
  `/memory add`); with an LLM configured the text goes through extraction instead, so free
  text (what another assistant says it remembers about you) works too.
- `/memory import [ … ]`: the service's JSON export, restored with its dates and provenance.
- `/memory import confirm <code>`: write what the last preview showed.

What would be written is kept in `pending_imports` (one per user, for `PENDING_TTL`), so the
confirmation need not paste the text again and every replica of the service can confirm it.
The code is an HMAC of the user and the items under the installation's API key: a code from
another preview, or from another user, confirms nothing. Cells are resolved again when the
code is typed, with the confirming chat's rules (privacy.command_write_scope): confirming in
a shared chat writes no Personal memory. Guards and dedup are those of every import
(service/flows/imports.py), run again at write time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from service.core import banks, forget_guard, privacy
from service.core import commands as text
from service.core.extraction import OpKind, TurnText, build_messages, parse_operations
from service.core.imports import TAG_OPENWEBUI, TAG_TEXT, ImportItem, parse_export, split_facts
from service.core.records import Bank, ChatContext, Scope, SourceKind
from service.errors import ExtractionOutputInvalid, InvalidInput, LLMNotConfigured, LLMUnavailable
from service.flows import imports
from service.flows.runtime import Runtime
from service.llm.client import decode_json_answer
from service.storage import forgotten_texts, installation
from service.storage import imports as store
from service.storage import remember as remember_store

log = logging.getLogger(__name__)

PENDING_TTL = timedelta(hours=1)
"""How long a preview can be confirmed."""

PREVIEW_LINES = 30
"""Most memories listed in a preview (the count is always complete)."""

USAGE = (
    "Paste what to import after the command, one fact a line:\n\n"
    "`/memory import`\n`- I keep bees`\n`- My sister is Ana`\n\n"
    "or the JSON of `/memory export`. I show what would be added and ask for a code first."
)


def _chat_cells(chat: ChatContext) -> imports.CellFor:
    writable = privacy.command_write_scope(chat)

    def cell_for(item: ImportItem) -> Scope | None:
        cell = writable.scope_for(item.bank)
        if cell is None or not banks.spec(item.bank).portable:
            return None
        folder_id, assistant_id = banks.owner_ids(cell)
        if item.folder_id not in (None, folder_id):
            return None  # another folder's Project Memory is not this chat's to write
        if item.assistant_id not in (None, assistant_id):
            return None  # nor another assistant's memory
        return cell

    return cell_for


async def run(rt: Runtime, chat: ChatContext, args: str, *, now: datetime | None) -> str:
    """The answer to `/memory import <args>` (a preview, or the result of a confirmation)."""
    if not privacy.takes_whole_memory_commands(chat):
        raise InvalidInput("import works in a private chat only")
    word, _, rest = args.partition(" ")
    if word.lower() == "confirm":
        return await _confirm(rt, chat, rest.strip())
    if args.strip().lower().split()[:1] == [OPENWEBUI_WORD]:
        # the filter answers this one itself, with the memories it reads inside Open WebUI
        return (
            "`/memory import openwebui` works through the memory filter inside Open WebUI; "
            "this one could not read Open WebUI's memories."
        )
    if not args.strip():
        return USAGE
    # the preview may wait on the LLM: recorded first, so a forget all, a deletion of this
    # chat or of the account meanwhile marks it, and it then keeps nothing to confirm
    async with rt.db.unit_of_work() as session:
        request_id = await remember_store.start(
            session,
            user_id=chat.user_id,
            chat_id=chat.chat_id or "",
            message_id=PREVIEW_REQUEST,
            at=datetime.now(UTC),
        )
    try:
        return await _preview_text(rt, chat, args, request_id=request_id, now=now)
    finally:
        async with rt.db.unit_of_work() as session:
            await remember_store.finish(session, request_id=request_id)


PREVIEW_REQUEST = "/memory import"
"""`message_id` of a preview's row in `remember_requests` (a request whose LLM call runs)."""

DISCARDED = {
    "forget_all": "you forgot all your memories while I was reading the text",
    "chat_deleted": "this chat was deleted while I was reading the text",
    "user_deleted": "the account was deleted while I was reading the text",
    remember_store.GONE: "the preview ran out before it was ready; paste the text again",
}
"""Why a preview keeps nothing (the reasons `storage/remember.py` marks a request with)."""


async def _preview_text(
    rt: Runtime, chat: ChatContext, args: str, *, request_id: int, now: datetime | None
) -> str:
    at = now or datetime.now(UTC)
    items, exact = await _items(rt, chat, args, at=at)
    if not items:
        return "I found no facts to import in that text."
    return await _preview(rt, chat, items, exact=exact, request_id=request_id)


async def _preview(
    rt: Runtime,
    chat: ChatContext,
    items: list[ImportItem],
    *,
    exact: bool,
    source: str = "",
    request_id: int | None = None,
    forgotten: int = 0,
) -> str:
    """What `items` would add, kept until the code is typed; the answer shows the code.

    `source` names where the items come from in the answer (" from Open WebUI");
    `request_id`: the preview's row in `remember_requests` (a forget all or a deletion that
    marked it meanwhile leaves nothing to confirm); `forgotten`: items skipped before because
    the user forgot them here (counted in the answer).
    """
    report = await imports.preview(rt, items=items, cell_for=_chat_cells(chat), exact=exact)
    report = dataclasses.replace(report, forgotten=forgotten)
    skipped = _skipped(report)
    if not report.new:
        return f"Nothing new to import{source}{skipped}."
    pending = [_to_json(p, exact=exact) for p in report.new]
    code = _code(rt, chat.user_id, pending)
    async with rt.db.unit_of_work() as session:
        if request_id is not None:
            discarded = await remember_store.lock(session, request_id=request_id)
            if discarded is not None:
                return f"Nothing is kept to import: {DISCARDED.get(discarded, discarded)}."
        await store.save_pending(
            session, user_id=chat.user_id, code=code, items=pending, at=datetime.now(UTC)
        )
    shown = [
        f"- {p.item.bank.label} · {p.item.created_at:%Y-%m-%d} · "
        f"{text.escape_markdown(p.item.content)}"
        for p in report.new[:PREVIEW_LINES]
    ]
    more = len(report.new) - len(shown)
    if more:
        shown.append(f"- … and {more} more")
    return (
        f"**I would add {text.counted(len(report.new), 'memory', 'memories')}{source}**"
        f"{skipped}:\n\n"
        + "\n".join(shown)
        + f"\n\nNothing is written yet. To add {'it' if len(report.new) == 1 else 'them'}, type:"
        + f"\n\n`/memory import confirm {code}`"
    )


def _skipped(report: imports.ImportReport) -> str:
    parts = []
    if report.forgotten:
        parts.append(
            f"{report.forgotten} you forgot here, skipped (`/memory import openwebui "
            f"{FORGOTTEN_WORD}` brings them back)"
        )
    if report.duplicates:
        parts.append(f"{report.duplicates} already known")
    if report.refused:
        parts.append(f"{report.refused} refused (instructions or secrets)")
    if report.not_allowed:
        parts.append(f"{report.not_allowed} for banks this chat may not write")
    if report.over_cap:
        parts.append(f"{report.over_cap} past the limit of memories you may keep")
    return f" ({'; '.join(parts)})" if parts else ""


async def _items(
    rt: Runtime, chat: ChatContext, args: str, *, at: datetime
) -> tuple[list[ImportItem], bool]:
    """The items of the pasted text, and whether they restore an export (exact dedup)."""
    body = args.strip()
    if body.startswith(("[", "{")):
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            # most likely an export cut at the command's 4,000 characters: never read its
            # lines as facts
            raise InvalidInput(
                "that looks like a memory export but is not complete JSON; a chat command "
                "holds at most 4,000 characters, so import a larger export with "
                "`python -m service memories import` or POST …/memories/import"
            ) from exc
        try:
            return list(parse_export(data).items), True
        except ValueError as exc:
            raise InvalidInput(str(exc)) from exc
    # an assistant with its own memory: pasted facts are for it (the only bank it writes)
    default = privacy.default_bank(chat, privacy.command_write_scope(chat))
    if rt.llm.configured:
        extracted = await _extract(rt, chat, body, at=at)
        if extracted is not None:
            return extracted, False
    items = []
    for line in split_facts(body):
        try:
            bank, fact = text.split_bank_prefix(line)
        except ValueError as exc:
            raise InvalidInput(f"{exc} (in “{line[:80]}”)") from exc
        if fact:
            items.append(_item(bank or default, fact, at=at, source=SourceKind.MANUAL, chat=chat))
    return items, False


def _item(
    bank: Bank,
    content: str,
    *,
    at: datetime,
    source: SourceKind,
    chat: ChatContext,
    tags: tuple[str, ...] = (),
    confidence: float = 1.0,
) -> ImportItem:
    return ImportItem(
        bank=bank,
        content=content,
        tags=(*tags, TAG_TEXT),
        confidence=confidence,
        source_kind=source,
        source_chat_id=chat.chat_id or None,  # the chat it was pasted in
        source_message_id=None,
        created_at=at,
        updated_at=at,
    )


async def _extract(
    rt: Runtime, chat: ChatContext, body: str, *, at: datetime
) -> list[ImportItem] | None:
    """Facts of free text by the extraction prompt; None when the LLM fails (the lines are
    then taken one fact each).
    """
    writable = privacy.command_write_scope(chat)
    allowed = [r.bank for r in banks.rows() if r.portable and writable.scope_for(r.bank)]
    messages = build_messages(
        turns=[TurnText(user_message=body, assistant_message=None, history=())],
        user_name=chat.user_name,
        now=at,
        neighbours=[],
        allowed_banks=allowed,
    )
    try:
        answer = await rt.llm.complete(messages, json_answer=True)
        operations = parse_operations(decode_json_answer(answer), refs={}, allowed_banks=allowed)
    except (LLMUnavailable, LLMNotConfigured, ExtractionOutputInvalid) as exc:
        log.info("import: extraction failed (%s); taking one fact a line", type(exc).__name__)
        return None
    return [
        _item(
            op.bank,
            op.content,
            at=at,
            source=SourceKind.INFERENCE if op.inferred else SourceKind.EXTRACTION,
            chat=chat,
            tags=op.tags,
            confidence=op.confidence,
        )
        for op in operations
        if op.op in (OpKind.NEW, OpKind.UPDATE) and op.content
    ]


def _to_json(planned: imports.Planned, *, exact: bool) -> dict[str, Any]:
    """A previewed item as kept until confirmed (the export's format, read by parse_export)."""
    item = planned.item
    folder_id, assistant_id = banks.owner_ids(planned.cell)
    return {
        "bank": item.bank.value,
        "content": item.content,
        "tags": list(item.tags),
        "confidence": item.confidence,
        "source": item.source_kind.value,
        "source_chat_id": item.source_chat_id,
        "source_message_id": item.source_message_id,
        "folder_id": folder_id,
        "assistant_id": assistant_id,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
        "exact": exact,
    }


def _code(rt: Runtime, user_id: str, pending: list[dict[str, Any]]) -> str:
    """Six hex digits tied to this user and exactly these items."""
    key = rt.settings.bearer_key().encode()
    message = json.dumps([user_id, pending], sort_keys=True, ensure_ascii=False).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:6]


async def _confirm(rt: Runtime, chat: ChatContext, code: str) -> str:
    if not code:
        return "Usage: `/memory import confirm <code>` (the code the preview showed)"
    async with rt.db.unit_of_work() as session:
        pending = await store.take_pending(
            session,
            user_id=chat.user_id,
            code=code.lower(),
            newer_than=datetime.now(UTC) - PENDING_TTL,
        )
    if pending is None:
        return (
            "That code confirms no import (a newer preview replaces an older one, and a "
            "preview is kept for an hour). Paste the text again with `/memory import`."
        )
    exact = bool(pending and pending[0].get("exact"))
    items = list(parse_export(pending).items)
    from_openwebui = bool(items) and all(TAG_OPENWEBUI in i.tags for i in items)
    report = await imports.run(
        rt,
        items=items,
        cell_for=_chat_cells(chat),
        exact=exact,
        actor=f"user:{chat.user_id}",
        reason=OPENWEBUI_REASON if from_openwebui else "imported by the user with /memory import",
    )
    lines = "\n".join(text.memory_line(m) for m in report.added)
    if not report.added:
        return f"Nothing was added{_skipped(report)}."
    added = text.counted(len(report.added), "memory", "memories")
    return f"**Imported {added}**{_skipped(report)}:\n\n{lines}"


OPENWEBUI_WORD = "openwebui"
"""`/memory import openwebui`: the filter answers it with the user's Open WebUI memories."""

OPENWEBUI_REASON = "imported from Open WebUI's built-in memory"


FORGOTTEN_WORD = "forgotten"
"""`/memory import openwebui forgotten`: import the memories forgotten here as well."""


async def from_openwebui(
    rt: Runtime,
    chat: ChatContext,
    memories: list[tuple[str, datetime, datetime]],
    *,
    include_forgotten: bool = False,
) -> str:
    """Preview the import of the sender's memories of Open WebUI's built-in Memory feature,
    read by the filter inside Open WebUI: (content, created_at, updated_at) each, into
    Personal (no LLM needed), tagged `import:openwebui`, dated with their original times.
    Like pasted text, nothing is written until `/memory import confirm <code>`; dedup against
    what is stored runs for the preview and again at the write, so a second run adds
    nothing. A text the user forgot here is skipped (its keyed digest,
    `storage/forgotten_texts.py`) unless `include_forgotten`; the answer says how many.
    Private chats only.
    """
    if not privacy.takes_whole_memory_commands(chat):
        return "That didn't work: import works in a private chat only."
    if not memories:
        return (
            "Open WebUI holds no memories of yours to import (Settings → Personalization → Memory)."
        )
    items, forgotten = openwebui_items(memories), 0
    if not include_forgotten:
        items, forgotten = await _without_forgotten(rt, items, user_id=chat.user_id)
    return await _preview(
        rt, chat, items, exact=False, source=" from Open WebUI", forgotten=forgotten
    )


async def import_openwebui(
    rt: Runtime,
    *,
    cell_for: imports.CellFor,
    memories: list[tuple[str, datetime, datetime]],
    actor: str,
    skip_forgotten_of: str | None = None,
) -> imports.ImportReport:
    """Write Open WebUI memories ((content, created_at, updated_at) each) as Personal
    memories tagged `import:openwebui` with their own dates; fuzzy dedup (see imports.py).
    The admin's CLI path (`python -m service openwebui import-memories`): no preview.

    Args:
        skip_forgotten_of: a user id: texts that user forgot here (the same text as it would
            be stored, by keyed digest) are skipped and counted in `forgotten`.
    """
    items, forgotten = openwebui_items(memories), 0
    if skip_forgotten_of is not None and items:
        items, forgotten = await _without_forgotten(rt, items, user_id=skip_forgotten_of)
    report = await imports.run(
        rt,
        items=items,
        cell_for=cell_for,
        exact=False,
        actor=actor,
        reason=OPENWEBUI_REASON,
    )
    return dataclasses.replace(report, forgotten=forgotten)


def openwebui_items(memories: list[tuple[str, datetime, datetime]]) -> list[ImportItem]:
    """Open WebUI memories as Personal import items tagged `import:openwebui`, each with its
    own dates (content cut at 2,000 characters).
    """
    return [
        ImportItem(
            bank=Bank.PERSONAL,
            content=content[:2_000],
            tags=(TAG_OPENWEBUI,),
            confidence=1.0,
            source_kind=SourceKind.MANUAL,  # the user wrote or accepted it in Open WebUI
            source_chat_id=None,
            source_message_id=None,
            created_at=created,
            updated_at=max(created, updated),
        )
        for content, created, updated in memories
    ]


async def _without_forgotten(
    rt: Runtime, items: list[ImportItem], *, user_id: str
) -> tuple[list[ImportItem], int]:
    """`items` less those whose stored text the user forgot here; (kept, skipped)."""
    async with rt.db.unit_of_work() as session:
        key = await installation.secret(session, forget_guard.SECRET_NAME)
        digests = [
            forget_guard.text_digest(stored, key) if stored is not None else None
            for stored in (imports.guard(i.content, typed=True) for i in items)
        ]
        known = await forgotten_texts.known(
            session, user_id=user_id, digests=[d for d in digests if d is not None]
        )
    kept = [i for i, d in zip(items, digests, strict=True) if d is None or d not in known]
    return kept, len(items) - len(kept)
