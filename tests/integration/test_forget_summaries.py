"""Forgetting a memory that was merged into a summary reaches the summary too (case 31)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np
import psycopg

from service.core.commands import encode_id
from service.core.consolidation import SummaryDraft
from service.core.records import Bank, OwnerKind
from service.embeddings.encoder import Encoder
from service.storage import consolidation
from service.storage.db import Database
from testkit.live_service import LiveService

FACTS = ["Dog is called Rex", "Rex is a beagle", "Rex's vet is Dr. Lund"]


async def test_forgetting_a_merged_source_removes_the_summary_and_brings_the_rest_back(
    service: LiveService,
    database_url: str,
    encoder: Encoder,
    db_conn: psycopg.AsyncConnection,
) -> None:
    ids = [
        service.client.post("/v1/users/vic/memories", json={"content": f}).json()["id"]
        for f in FACTS
    ]
    text = "Vic's dog Rex is a beagle whose vet is Dr. Lund"
    db = Database.connect(database_url)
    now = datetime.now(UTC)
    async with db.unit_of_work() as session:
        summary = await consolidation.insert_summary(
            session,
            owner_kind=OwnerKind.USER,
            owner_id="vic",
            draft=SummaryDraft(
                text, Bank.PERSONAL, (), 1.0, now, now, tuple(uuid.UUID(i) for i in ids)
            ),
            embedding=np.asarray(encoder.encode_sync([text])[0]),
            embedding_model="m",
            at=now,
        )
        await consolidation.archive_into_summary(
            session, source_ids=[uuid.UUID(i) for i in ids], summary_id=summary.id, at=now
        )
    await db.dispose()
    assert [m["content"] for m in service.client.get("/v1/users/vic/memories").json()["items"]] == [
        text
    ]
    chat = {"user_id": "vic", "chat_id": "c", "kind": "saved"}
    listing = service.client.post("/v1/commands", json={"chat": chat, "command": "/memory list"})
    assert listing.json()["text"].endswith("Dr\\. Lund (merged from 3)")
    seq = (
        await (
            await db_conn.execute("SELECT seq FROM memories WHERE content = %s", (FACTS[2],))
        ).fetchone()
    )[0]
    forgotten = service.client.post(
        "/v1/commands", json={"chat": chat, "command": f"/memory forget {encode_id(seq)}"}
    )
    assert forgotten.json()["text"].startswith("Forgotten")
    rows = await (
        await db_conn.execute("SELECT count(*) FROM memories WHERE content ILIKE '%Lund%'")
    ).fetchone()
    assert rows == (0,)
    active = [m["content"] for m in service.client.get("/v1/users/vic/memories").json()["items"]]
    assert sorted(active) == sorted(FACTS[:2])
