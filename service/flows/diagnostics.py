"""What `doctor` reads of a database and an LLM answer, for the CLI (which never imports
storage or llm itself: tests/unit/test_import_contract.py).
"""

from __future__ import annotations

from typing import Any

from service.llm.client import decode_json_answer
from service.storage import admin, turns, vectors
from service.storage.admin import DatabaseFacts
from service.storage.db import Database

__all__ = ["DatabaseFacts", "connect", "database_facts", "llm_json", "turn_counts", "vector_models"]


def connect(url: str) -> Database:
    """A one-connection pool on `url` (close it with `await db.dispose()`)."""
    return Database.connect(url, pool_size=1)


async def database_facts(db: Database) -> DatabaseFacts:
    """The server's version and the pgvector extension's (installed and available)."""
    async with db.unit_of_work() as session:
        return await admin.database_facts(session)


async def turn_counts(db: Database) -> dict[str, int]:
    """Number of turns per status (queued, done, failed, discarded)."""
    async with db.unit_of_work() as session:
        return await turns.counts(session)


async def vector_models(db: Database) -> dict[str | None, int]:
    """Embedding model name → memories with content (None: no vector yet)."""
    async with db.unit_of_work() as session:
        return await vectors.models_in_use(session)


def llm_json(answer: str) -> Any:
    """An LLM answer read as the service reads extraction answers.

    Raises:
        as `llm.client.decode_json_answer` (no JSON object in the answer).
    """
    return decode_json_answer(answer)
