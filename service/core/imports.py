"""Import and export formats of memories: the JSON export read back, pasted text, Markdown.

Pure: parsing and formatting only; service/flows/imports.py embeds, deduplicates and writes.
The JSON format is the one `GET /v1/users/{id}/memories/export` and `/memory export` write
(service/flows/commands.py `export_json`); reading it back restores each active memory with
its bank, tags, confidence, dates and provenance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service.core import banks, dedup, redaction
from service.core.records import Bank, Memory, OwnerKind, SourceKind, Status

MAX_IMPORT_ITEMS = 5_000
"""Most memories one import may carry (a user's whole export stays well below)."""

MAX_CONTENT_CHARS = 2_000
"""Longest memory text an import accepts (longer lines are not one fact)."""

TAG_TEXT = "import:text"
"""Tag of memories pasted with `/memory import`."""

TAG_OPENWEBUI = "import:openwebui"
"""Tag of memories brought over from Open WebUI's built-in memory."""


class ExportedMemory(BaseModel):
    """One object of the JSON export (unknown keys, such as `id` and `uuid`, are ignored)."""

    model_config = ConfigDict(extra="ignore")

    bank: Bank
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    tags: list[str] = Field(default_factory=list, max_length=50)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    status: Status = Status.ACTIVE
    source: SourceKind = SourceKind.MANUAL
    source_chat_id: str | None = Field(default=None, max_length=255)
    source_message_id: str | None = Field(default=None, max_length=255)
    folder_id: str | None = Field(default=None, max_length=255)
    assistant_id: str | None = Field(default=None, max_length=255)
    created_at: datetime
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ImportItem:
    """A memory to be written by an import."""

    bank: Bank  #: where it goes (Project Memory needs `folder_id`)
    content: str  #: the fact
    tags: tuple[str, ...]  #: its tags, the origin tag included
    confidence: float  #: 0..1
    source_kind: SourceKind  #: provenance kept from the export, else manual
    source_chat_id: str | None  #: chat it came from, when known
    source_message_id: str | None  #: message it came from, when known
    created_at: datetime  #: when it was first stated (UTC)
    updated_at: datetime  #: last change (UTC), >= created_at
    folder_id: str | None = None  #: the folder of a Project memory
    assistant_id: str | None = None  #: the assistant of an Assistant memory


@dataclass(frozen=True, slots=True)
class ParsedExport:
    """What a JSON export holds: the active memories to import and how many were left out."""

    items: tuple[ImportItem, ...]  #: active Personal, Interaction Patterns and Project memories
    history: int  #: superseded or archived versions (not imported: history, never injected)
    unsupported: int  #: Chat Memory and summaries of a chat (they belong to one chat)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_export(data: object) -> ParsedExport:
    """Read the service's JSON export (a list of objects, or `{"memories": [...]}`).

    Raises:
        ValueError: not the export format, with a sentence naming the first bad object.
    """
    if isinstance(data, dict) and "memories" in data:
        data = data["memories"]
    if not isinstance(data, list):
        raise ValueError("the file is not a memory export: expected a JSON list of memories")
    if len(data) > MAX_IMPORT_ITEMS:
        raise ValueError(f"an import holds at most {MAX_IMPORT_ITEMS} memories, not {len(data)}")
    items: list[ImportItem] = []
    history = unsupported = 0
    for number, raw in enumerate(data, start=1):
        try:
            entry = ExportedMemory.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "object"
            raise ValueError(f"memory {number} of the file: {where}: {first['msg']}") from exc
        if entry.status is not Status.ACTIVE:
            history += 1
            continue
        row = banks.spec(entry.bank)
        if not row.portable or entry.source is SourceKind.CHAT_SUMMARY:
            unsupported += 1
            continue
        if row.owner_kind is OwnerKind.FOLDER and not entry.folder_id:
            raise ValueError(f"memory {number} of the file is {row.label} without a folder_id")
        if row.owner_kind is OwnerKind.ASSISTANT and not entry.assistant_id:
            raise ValueError(f"memory {number} of the file is {row.label} without an assistant_id")
        created = _utc(entry.created_at)
        items.append(
            ImportItem(
                bank=entry.bank,
                content=entry.content,
                tags=tuple(entry.tags),
                confidence=entry.confidence,
                source_kind=entry.source,
                source_chat_id=entry.source_chat_id,
                source_message_id=entry.source_message_id,
                created_at=created,
                updated_at=max(created, _utc(entry.updated_at or created)),
                folder_id=entry.folder_id if row.owner_kind is OwnerKind.FOLDER else None,
                assistant_id=entry.assistant_id if row.owner_kind is OwnerKind.ASSISTANT else None,
            )
        )
    return ParsedExport(tuple(items), history, unsupported)


_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.)])\s+")


def split_facts(text: str) -> list[str]:
    r"""One fact a line: bullets and numbers are dropped, blank lines and repeats skipped.

    "- I keep bees\n2. My sister is Ana" → ["I keep bees", "My sister is Ana"].
    """
    facts: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        fact = " ".join(_BULLET.sub("", line).split())
        key = dedup.normalize_text(fact)
        if fact and key and key not in seen:
            seen.add(key)
            facts.append(fact[:MAX_CONTENT_CHARS])
    return facts


def text_items(facts: Iterable[str], *, bank: Bank, at: datetime, tag: str) -> list[ImportItem]:
    """Pasted facts as manual memories of `bank`, dated `at`, tagged with their origin."""
    return [
        ImportItem(
            bank=bank,
            content=fact,
            tags=(tag,),
            confidence=1.0,
            source_kind=SourceKind.MANUAL,
            source_chat_id=None,
            source_message_id=None,
            created_at=_utc(at),
            updated_at=_utc(at),
        )
        for fact in facts
    ]


def same_text(a: str, b: str) -> bool:
    """True when two memory texts are the same fact written alike (case, spaces, punctuation
    aside) — the restore dedup, exact so two close but distinct memories both come back.
    """
    return dedup.normalize_text(a) == dedup.normalize_text(b)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~])")

_SOURCE_WORDS = {
    SourceKind.EXTRACTION: "stated in a chat",
    SourceKind.INFERENCE: "inferred from a chat",
    SourceKind.MANUAL: "added by hand",
    SourceKind.SUMMARY: "summary of older memories",
    SourceKind.CHAT_SUMMARY: "summary of a chat",
}


def export_markdown(rows: Sequence[Memory], *, ids: Sequence[str]) -> str:
    """Active memories as a Markdown document for people: one section per bank, one bullet
    per memory with its id, date, tags and provenance. `ids` are the rows' short ids.
    """
    shown = [(m, i) for m, i in zip(rows, ids, strict=True) if m.status is Status.ACTIVE]
    lines = [f"# Memories ({len(shown)})"]
    for bank in Bank:
        in_bank = [(m, i) for m, i in shown if m.bank is bank]
        if not in_bank:
            continue
        lines += ["", f"## {bank.label} ({len(in_bank)})", ""]
        for memory, short in in_bank:
            tags = f" · tags: {', '.join(memory.tags)}" if memory.tags else ""
            # redacted again on the way out: a row may predate the rules
            plain = " ".join(redaction.redact(memory.content).split())
            content = _MD_SPECIAL.sub(r"\\\1", plain)
            lines.append(
                f"- {content} — `{short}` · {memory.created_at:%Y-%m-%d} · "
                f"{_SOURCE_WORDS[memory.source_kind]}{tags}"
            )
    return "\n".join(lines) + "\n"
