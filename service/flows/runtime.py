"""The live parts every flow needs, built once by the entry point."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from cachetools import TTLCache

from service.config import Settings
from service.core.ranking import RankingParams
from service.embeddings.encoder import Encoder
from service.llm.client import LLMClient
from service.llm.relevance import RelevanceCache
from service.storage.db import Database, libpq_url
from service.storage.owner_indexes import IndexRegistry


class JobQueueError(Exception):
    """The job queue refused a job: its database call failed (not "already waiting")."""


class JobQueue(Protocol):
    """What flows ask of the job queue; jobs/queue.py implements it on procrastinate, so no
    flow imports the queue library (tests/unit/test_import_contract.py).
    """

    async def defer(
        self,
        task: str,
        *,
        queue: str,
        queueing_lock: str | None = None,
        schedule_in_s: float | None = None,
        connection: Any | None = None,
        **args: Any,
    ) -> bool:
        """Queue `task` with keyword `args` once: False when a job holding the same
        `queueing_lock` already waits. `schedule_in_s`: seconds before it may run (None: at
        once); `connection`: a psycopg connection whose transaction the job joins.

        Raises:
            JobQueueError: the queue refused the job.
        """
        ...

    def queues(self) -> frozenset[str]:
        """The queue of every registered task."""
        ...

    def open_async(self) -> AbstractAsyncContextManager[Any]:
        """Open the queue's connections for a `with` block (entry points, tests)."""
        ...

    async def close_async(self) -> None:
        """Close the queue's connections."""
        ...


@dataclass
class Runtime:
    """Database, embedding encoder, LLM client, job queue and settings."""

    settings: Settings
    db: Database
    encoder: Encoder
    llm: LLMClient
    jobs: JobQueue  #: built by bootstrap.py (jobs/queue.py); opened by the entry point
    #: libpq URL of a direct (not pooled) connection: cache notices, per-owner index builds;
    #: None = the engine's own URL
    direct_url: str | None = None
    relevance_cache: RelevanceCache = field(default_factory=RelevanceCache)
    #: the read path ran once since the start (flows/warmup.py); /readyz waits for it
    warm: bool = False
    #: which banks have their own indexes (catalog read at most every 30 s)
    owner_indexes: IndexRegistry = field(default_factory=IndexRegistry)
    #: (user, model) pairs whose reminder cues all carry that model's vectors (checked hourly)
    reminder_cues_current: TTLCache[tuple[str, str], bool] = field(
        default_factory=lambda: TTLCache(maxsize=50_000, ttl=3600)
    )
    #: users seen with no pending reminder; set anew by this process, or after 30 s when
    #: another service process set one
    reminders_none_pending: TTLCache[str, bool] = field(
        default_factory=lambda: TTLCache(maxsize=100_000, ttl=30)
    )

    def session_url(self) -> str:
        """The libpq URL of a direct connection for LISTEN and session locks (`direct_url`, else
        the engine's own URL).
        """
        return self.direct_url or libpq_url(
            self.db.engine.url.render_as_string(hide_password=False)
        )

    def ranking_params(self, budget_tokens: int | None = None) -> RankingParams:
        """The read path's knobs from the settings; `budget_tokens` overrides the context budget."""
        s = self.settings
        return RankingParams(
            relevance_threshold=s.relevance_threshold,
            relevance_weight=s.relevance_weight,
            half_life_days=s.half_life_days,
            confidence_weight=s.confidence_weight,
            refresh_on_use=s.refresh_on_use,
            budget_tokens=s.budget_tokens if budget_tokens is None else budget_tokens,
            max_items=s.max_injected,
            adaptive_fusion=s.adaptive_fusion,
            nearest_reserve=s.nearest_reserve,
            nearest_floor=s.nearest_floor,
            fusion_evidence=s.fusion_evidence,
            evidence_full=s.evidence_full,
            nearest_fill=s.nearest_fill,
            fill_margin=s.fill_margin,
            fill_margin_from=s.fill_margin_from,
            long_memory_chars=s.long_memory_chars,
        )
