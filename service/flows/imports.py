"""Write imported memories: guarded, deduplicated against what is stored, audited.

Every import (a JSON export restored through the API or the CLI, text pasted after
`/memory import`, Open WebUI's built-in memories) ends here. Each text passes the same
guards as a memory added by hand (instruction-like text refused, secrets redacted), then is
compared with the active memories of its cell and with the earlier items of the same import:

- `exact=True` (a restore): the same text (case, spacing and punctuation aside) is a
  duplicate, so two close but distinct memories of an export both come back;
- `exact=False` (text from elsewhere): the dedup of extraction (DESIGN §5.4: Levenshtein
  ratio > `dedup_text_ratio` or cosine > `dedup_cosine`).

The check is made again inside the writing transaction, under a per-owner advisory lock, so
an import repeated while the first still runs, or a memory written meanwhile, adds nothing
twice. Importing the same file twice therefore adds nothing the second time.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from service.core import banks, dedup, person, safety
from service.core import commands as text
from service.core.imports import TAG_OPENWEBUI, TAG_TEXT, ImportItem, parse_export
from service.core.imports import export_markdown as markdown_document
from service.core.records import Bank, Memory, OwnerKind, ReadScope, Scope, Status
from service.errors import InvalidInput
from service.flows import offload, planted_check
from service.flows import profile as profile_flow
from service.flows.runtime import Runtime
from service.storage import audit, memories, memory_search
from service.storage import imports as store

CellFor = Callable[[ImportItem], Scope | None]
"""Where an item may be written (None: not from here — counted as not allowed)."""


@dataclass(frozen=True, slots=True)
class Planned:
    """An item that passed the guards, with the cell it goes to and its embedding."""

    cell: Scope
    item: ImportItem  #: content already guarded (NFC, secrets redacted)
    vector: np.ndarray = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did (or, for a preview, would do)."""

    new: tuple[Planned, ...]  #: items that are not stored yet (written, unless a preview)
    added: tuple[Memory, ...]  #: the memories written (empty for a preview)
    duplicates: int  #: items already stored, or repeated within the import
    refused: int  #: instruction-like or nothing but secrets
    not_allowed: int  #: banks the caller may not write (e.g. Personal in a shared chat)
    forgotten: int = 0  #: texts the user forgot here (Open WebUI imports skip them unasked)
    over_cap: int = 0  #: new, but past the owner's MEMORY_CAP of active memories (not written)


def user_cell(user_id: str) -> CellFor:
    """Cells of a restore for `user_id`: their own banks, a Project memory its folder, an
    Assistant memory the user's memory for its assistant.
    """

    def cell_for(item: ImportItem) -> Scope | None:
        if not banks.spec(item.bank).portable:
            return None
        try:
            return banks.owner_of(
                item.bank, user_id=user_id, folder_id=item.folder_id, assistant_id=item.assistant_id
            )
        except ValueError:
            return None  # ids too long together: counted as not allowed

    return cell_for


TYPED_ORIGINS = (TAG_TEXT, TAG_OPENWEBUI)
"""Origin tags of texts a person wrote (pasted facts, Open WebUI's own memories): stored in
the third person like `/memory add`, where "I" would read as the assistant's. An export's
texts are restored exactly as they were."""


def guard(content: str, *, typed: bool = False) -> str | None:
    """The text as it would be stored, or None when it must not be (instruction-like, empty,
    or little but redacted secrets) — the guards of `/memory add` and extraction.

    Args:
        typed: a person's own words (`TYPED_ORIGINS`): first person becomes third person.
    """
    text = unicodedata.normalize("NFC", content).strip()
    if not text or safety.looks_like_instruction(text):
        return None
    text = safety.redact_secrets(text)
    if safety.mostly_redacted(text):
        return None
    return person.third_person(text) if typed else text


def _guarded(
    items: Sequence[ImportItem], cell_for: CellFor
) -> tuple[list[tuple[Scope, ImportItem]], int, int]:
    """The items that pass the guards, with their cells; (kept, refused, not allowed).
    Pure CPU (regexes over every text): run on a worker thread.
    """
    kept: list[tuple[Scope, ImportItem]] = []
    refused = not_allowed = 0
    for item in items:
        cell = cell_for(item)
        if cell is None:
            not_allowed += 1
            continue
        text = guard(item.content, typed=any(t in TYPED_ORIGINS for t in item.tags))
        if text is None:
            refused += 1
            continue
        kept.append((cell, _with_content(item, text)))
    return kept, refused, not_allowed


async def _plan(
    rt: Runtime, items: Sequence[ImportItem], cell_for: CellFor, *, owner: str
) -> tuple[list[Planned], int, int]:
    """Guarded items with their cells and vectors; (planned, refused, not allowed).

    The guards run on a worker thread and the texts are embedded on the encoder's bulk lane
    (`flows.offload`, `Encoder.encode(bulk=True)`): an import of 5,000 items never holds the
    loop that serves other users' inlets.
    """
    kept, refused, not_allowed = await offload.in_worker(owner, _guarded, items, cell_for)
    verdicts = await planted_check.verdicts(rt, [item.content for _, item in kept])
    refused += sum(v.refused for v in verdicts)
    kept = [k for k, v in zip(kept, verdicts, strict=True) if not v.refused]
    if not kept:
        return [], refused, not_allowed
    vectors = await rt.encoder.encode([item.content for _, item in kept], bulk=True)
    planned = [
        Planned(cell, item, np.asarray(vectors[i], dtype=np.float32))
        for i, (cell, item) in enumerate(kept)
    ]
    return planned, refused, not_allowed


def _with_content(item: ImportItem, content: str) -> ImportItem:
    return replace(item, content=content)


def _exact_fresh(
    planned: Sequence[Planned], stored: dict[Scope, list[str]]
) -> tuple[list[Planned], int]:
    """The restore dedup in linear time: one normalized key per text (`same_text`), looked
    up in a set per cell. Pure CPU: run on a worker thread.
    """
    known = {cell: {dedup.normalize_text(t) for t in texts} for cell, texts in stored.items()}
    fresh: list[Planned] = []
    duplicates = 0
    for plan in planned:
        keys = known.setdefault(plan.cell, set())
        key = dedup.normalize_text(plan.item.content)
        if key in keys:
            duplicates += 1
            continue
        keys.add(key)
        fresh.append(plan)
    return fresh, duplicates


async def _fresh(
    rt: Runtime, session: AsyncSession, planned: Sequence[Planned], *, exact: bool, owner: str
) -> tuple[list[Planned], int]:
    """The planned items not stored yet and not repeated earlier in the import."""
    if exact:
        stored: dict[Scope, list[str]] = {}
        for cell in dict.fromkeys(p.cell for p in planned):
            rows = await memories.export_rows(session, scope=ReadScope((cell,)))
            stored[cell] = [m.content for m in rows if m.status is Status.ACTIVE]
        return await offload.in_worker(owner, _exact_fresh, planned, stored)
    accepted: dict[Scope, list[Planned]] = {}
    fresh: list[Planned] = []
    duplicates = 0
    for plan in planned:
        earlier = accepted.setdefault(plan.cell, [])
        near = await memory_search.search(
            session, scope=ReadScope((plan.cell,)), query_vector=plan.vector, limit=5
        )
        pairs = [(c.memory, c.cosine) for c in near]
        duplicate = dedup.find_duplicate(
            plan.item.content,
            pairs,
            text_threshold=rt.settings.dedup_text_ratio,
            cosine_threshold=rt.settings.dedup_cosine,
        ) is not None or any(
            # core's rule, as against stored rows: a differing number, date, name or
            # negation keeps two facts apart however close their texts are
            dedup.same_fact(
                plan.item.content,
                p.item.content,
                float(np.dot(plan.vector, p.vector)),
                text_threshold=rt.settings.dedup_text_ratio,
                cosine_threshold=rt.settings.dedup_cosine,
            )
            for p in earlier
        )
        if duplicate:
            duplicates += 1
            continue
        earlier.append(plan)
        fresh.append(plan)
    return fresh, duplicates


async def _within_cap(
    rt: Runtime, session: AsyncSession, fresh: Sequence[Planned]
) -> tuple[list[Planned], int]:
    """The fresh items that fit under MEMORY_CAP, per owner (a user's, a folder's or an
    assistant memory's active memories, all banks): (kept in order, over the cap).

    An import never takes an owner past the cap the summarizer keeps (config.memory_cap):
    what does not fit is counted and said, not written. An admin restoring a larger bank
    raises MEMORY_CAP first (docs/reference/http-api.md, import).
    """
    cap = rt.settings.memory_cap
    room: dict[tuple[OwnerKind, str], int] = {}
    kept: list[Planned] = []
    over = 0
    for plan in fresh:
        owner = (plan.cell.owner_kind, plan.cell.owner_id)
        if owner not in room:
            active = await memories.count_active(
                session, scope=ReadScope(tuple(Scope(owner[0], owner[1], b) for b in Bank))
            )
            room[owner] = max(cap - active, 0)
        if room[owner] <= 0:
            over += 1
            continue
        room[owner] -= 1
        kept.append(plan)
    return kept, over


async def preview(
    rt: Runtime,
    *,
    items: Sequence[ImportItem],
    cell_for: CellFor,
    exact: bool,
    owner: str = "import",
) -> ImportReport:
    """What `run` would write now, writing nothing.

    Args:
        owner: whose work this is, for the worker threads' fairness (`flows.offload`).
    """
    planned, refused, not_allowed = await _plan(rt, items, cell_for, owner=owner)
    async with rt.db.unit_of_work() as session:
        fresh, duplicates = await _fresh(rt, session, planned, exact=exact, owner=owner)
        fresh, over_cap = await _within_cap(rt, session, fresh)
    return ImportReport(tuple(fresh), (), duplicates, refused, not_allowed, over_cap=over_cap)


async def run(
    rt: Runtime,
    *,
    items: Sequence[ImportItem],
    cell_for: CellFor,
    exact: bool,
    actor: str,
    reason: str,
) -> ImportReport:
    """Write the items that are not stored yet and fit under the owner's MEMORY_CAP, in one
    transaction of batched statements; each write audited (`actor`, `reason`: e.g. "cli",
    "restored from a memory export").

    Returns:
        The report; `added` in the order of `items`.
    """
    planned, refused, not_allowed = await _plan(rt, items, cell_for, owner=actor)
    async with rt.db.unit_of_work() as session:
        for owner in sorted({p.cell.owner_id for p in planned}):
            await store.lock_owner(session, owner_id=owner)
        fresh, duplicates = await _fresh(rt, session, planned, exact=exact, owner=actor)
        fresh, over_cap = await _within_cap(rt, session, fresh)
        added: list[Memory] = []
        # batches of rows: one INSERT … RETURNING per batch and one for its audit events
        for start in range(0, len(fresh), INSERT_BATCH):
            added += await memories.insert_many(
                session,
                [_new_row(rt, plan) for plan in fresh[start : start + INSERT_BATCH]],
            )
        await audit.record_created_many(session, added, actor=actor, reason=reason)
    for user_id in sorted({m.owner_id for m in added if m.owner_kind is OwnerKind.USER}):
        await profile_flow.request_refresh(rt, user_id=user_id)
    return ImportReport(
        tuple(fresh), tuple(added), duplicates, refused, not_allowed, over_cap=over_cap
    )


INSERT_BATCH = 500
"""Memories inserted per statement by an import (a 5,000-item restore is ten statements)."""


def _new_row(rt: Runtime, plan: Planned) -> memories.NewMemory:
    item = plan.item
    return memories.NewMemory(
        owner_kind=plan.cell.owner_kind,
        owner_id=plan.cell.owner_id,
        bank=plan.cell.bank,
        content=item.content,
        tags=tuple(item.tags),
        confidence=item.confidence,
        source_kind=item.source_kind,
        source_chat_id=item.source_chat_id,
        source_message_id=item.source_message_id,
        created_at=item.created_at,
        updated_at=item.updated_at,
        embedding=plan.vector,
        embedding_model=rt.encoder.model_name,
    )


@dataclass(frozen=True, slots=True)
class RestoreReport:
    """A restore of a JSON export: the import, plus what the file held but is not restored."""

    report: ImportReport
    history: int  #: superseded or archived versions in the file (not restored)
    unsupported: int  #: Chat Memory in the file (it belongs to one chat; not restored)

    def as_json(self) -> dict[str, int]:
        """Counts for the API and the CLI."""
        return {
            "added": len(self.report.added),
            "would_add": len(self.report.new),
            "duplicates": self.report.duplicates,
            "refused": self.report.refused,
            "not_allowed": self.report.not_allowed,
            "over_cap": self.report.over_cap,
            "history_skipped": self.history,
            "chat_memory_skipped": self.unsupported,
        }


async def restore_export(
    rt: Runtime, *, user_id: str, data: object, actor: str, dry_run: bool = False
) -> RestoreReport:
    """Import a JSON export (`GET …/memories/export`) into `user_id`'s banks (Project
    memories into the folders named in the file); nothing written when `dry_run`.

    Raises:
        InvalidInput: the data is not an export, with a sentence.
    """
    try:  # thousands of items: parsed on a worker thread, not on the loop
        parsed = await offload.in_worker(actor, parse_export, data)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
    cell_for = user_cell(user_id)
    if dry_run:
        report = await preview(rt, items=parsed.items, cell_for=cell_for, exact=True, owner=actor)
    else:
        report = await run(
            rt,
            items=parsed.items,
            cell_for=cell_for,
            exact=True,
            actor=actor,
            reason="restored from a memory export",
        )
    return RestoreReport(report, parsed.history, parsed.unsupported)


def export_markdown(rows: Sequence[Memory]) -> str:
    """The active memories of `rows` as a Markdown document (service/core/imports.py)."""
    return markdown_document(rows, ids=[text.encode_id(m.seq) for m in rows])
