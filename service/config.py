"""Service settings, read from the environment (one table in the README)."""

from __future__ import annotations

import ipaddress
import secrets
from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.core.reminders import CONTEXT_SIMILARITY
from service.errors import ConfigurationError


class Settings(BaseSettings):
    """Every knob of the service. Defaults are the founding design's (DESIGN §11)."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", populate_by_name=True)

    # --- where things live -------------------------------------------------------------
    state_dir: Path = Field(
        default=Path(".state"),
        alias="MEMORY_STATE_DIR",
        description="Folder for the embedded PostgreSQL data and the generated API key.",
    )
    database_url: str | None = Field(
        default=None,
        alias="DATABASE_URL",
        description="PostgreSQL URL with pgvector; unset = embedded PostgreSQL in the state dir.",
    )
    host: str = Field(
        default="127.0.0.1",
        alias="MEMORY_HOST",
        description="Address to bind; beyond loopback only with MEMORY_API_KEY set.",
    )
    port: int = Field(default=8765, alias="MEMORY_PORT", ge=1, le=65535, description="Port.")
    api_key: SecretStr | None = Field(
        default=None,
        alias="MEMORY_API_KEY",
        description="Bearer key the filter must send; unset = generated once into the state dir.",
    )

    # --- LLM for extraction ------------------------------------------------------------
    llm_base_url: str | None = Field(
        default=None,
        alias="LLM_BASE_URL",
        description=(
            "OpenAI-compatible base URL (…/v1, or Open WebUI's …/api); unset = no extraction."
        ),
    )
    llm_model: str | None = Field(
        default=None, alias="LLM_MODEL", description="Model id used for extraction."
    )
    llm_api_key: SecretStr | None = Field(
        default=None, alias="LLM_API_KEY", description="Bearer key of the LLM endpoint."
    )
    llm_timeout_s: float = Field(
        default=60.0, alias="LLM_TIMEOUT_S", gt=0, description="Seconds one LLM call may take."
    )
    llm_json_mode: bool = Field(
        default=True,
        alias="LLM_JSON_MODE",
        description="Send response_format=json_object (turn off for backends that reject it).",
    )

    # --- embeddings --------------------------------------------------------------------
    embedding_model_path: Path | None = Field(
        default=None,
        alias="EMBEDDING_MODEL_PATH",
        description="sentence-transformers folder; unset = the bundled all-MiniLM-L6-v2.",
    )
    embedding_backend: str = Field(
        default="onnx",
        alias="EMBEDDING_BACKEND",
        pattern="^(onnx|torch)$",
        description="onnx (fast, steady under load; exported once into the state dir) or torch.",
    )
    embedding_threads: int = Field(
        default=1, alias="EMBEDDING_THREADS", ge=1, le=64, description="CPU threads for embedding."
    )

    # --- retrieval (DESIGN §6) -----------------------------------------------------------
    candidate_limit: int = Field(
        default=50,
        alias="MEMORY_CANDIDATES",
        ge=1,
        le=500,
        description="Nearest memories looked at per turn (exact search within allowed banks).",
    )
    relevance_threshold: float = Field(
        default=0.7,
        alias="MEMORY_RELEVANCE_THRESHOLD",
        ge=0,
        le=1,
        description="Minimum relevance 1 − cosine_distance/2 (0.7 ⇔ cosine 0.4).",
    )
    relevance_weight: float = Field(
        default=0.95,
        alias="MEMORY_RELEVANCE_WEIGHT",
        ge=0,
        le=1,
        description="Share of relevance in the score; the rest is recency (0.95: chosen on "
        "LoCoMo conversations 0–4, where 0.8 cost 2–3 points of Recall@10; a tie-breaker).",
    )
    half_life_days: float = Field(
        default=60.0,
        alias="MEMORY_HALF_LIFE_DAYS",
        gt=0,
        description="Days after which a memory's recency weight is one half.",
    )
    confidence_weight: float = Field(
        default=0.1,
        alias="MEMORY_CONFIDENCE_WEIGHT",
        ge=0,
        le=1,
        description="Share of the score a memory's doubt (1 − confidence) takes away.",
    )
    refresh_on_use: bool = Field(
        default=False,
        alias="MEMORY_REFRESH_ON_USE",
        description="Recency counts from a memory's last use in a reply, not only its creation "
        "(off: on the LoCoMo replay it cost 2 points of evidence hits).",
    )
    budget_tokens: int = Field(
        default=400,
        alias="MEMORY_BUDGET_TOKENS",
        ge=0,
        le=8000,
        description="Default token budget of the injected memories (the filter valve wins).",
    )
    max_injected: int = Field(
        default=20,
        alias="MEMORY_MAX_INJECTED",
        ge=0,
        le=200,
        description="Most memories injected into one turn.",
    )
    context_deadline_s: float = Field(
        default=0.5,
        alias="MEMORY_CONTEXT_DEADLINE_S",
        gt=0,
        le=30,
        description="The service's own inlet deadline; past it only the cached profile is sent.",
    )
    llm_relevance: bool = Field(
        default=False,
        alias="MEMORY_LLM_RELEVANCE",
        description="Let the LLM judge memories in the 0.7–0.93 band (cached; adds latency).",
    )
    profile_refresh_hours: float = Field(
        default=24.0,
        alias="MEMORY_PROFILE_REFRESH_HOURS",
        gt=0,
        description="A user returning after this long gets their core profile rewritten.",
    )
    core_max_items: int = Field(
        default=5,
        alias="MEMORY_CORE_ITEMS",
        ge=0,
        le=50,
        description="Core memories injected with every turn (at most a third of the budget).",
    )
    ann_min_memories: int = Field(
        default=5_000,
        alias="MEMORY_ANN_MIN_MEMORIES",
        ge=0,
        description="Active memories of one bank of one owner from which that bank gets its own "
        "HNSW and full-text indexes, built in the background (kept until it falls "
        "below half); smaller banks are searched exactly. 0 = never.",
    )
    ann_ef_search: int = Field(
        default=100,
        alias="MEMORY_ANN_EF_SEARCH",
        ge=1,
        le=1000,
        description="hnsw.ef_search of those indexes, raised to 2 × MEMORY_CANDIDATES when "
        "lower: higher is closer to exact and slower.",
    )
    ann_refresh_s: float = Field(
        default=300.0,
        alias="MEMORY_ANN_REFRESH_S",
        gt=0,
        description="Seconds between two checks for banks that need, or no longer need, "
        "their own indexes.",
    )

    # --- write path (DESIGN §5) --------------------------------------------------------
    dedup_text_ratio: float = Field(
        default=0.95,
        alias="MEMORY_DEDUP_TEXT_RATIO",
        ge=0,
        le=1,
        description="A new fact this similar in text to an existing one is not stored.",
    )
    dedup_cosine: float = Field(
        default=0.97,
        alias="MEMORY_DEDUP_COSINE",
        ge=0,
        le=1,
        description="A new fact this close in meaning (cosine) to an existing one is not stored.",
    )
    extraction_neighbours: int = Field(
        default=10,
        alias="MEMORY_EXTRACTION_NEIGHBOURS",
        ge=0,
        le=50,
        description="Existing memories shown to the LLM so it can update instead of repeat.",
    )
    extraction_max_attempts: int = Field(
        default=5,
        alias="MEMORY_EXTRACTION_ATTEMPTS",
        ge=1,
        le=20,
        description="Tries of an extraction job (LLM down) before its turn is marked failed.",
    )
    # --- extraction batches and rolling chat summaries (seeds/000) ----------------------
    # Tokens, messages and lookback are the founding guide's (seeds/000). The quiet period
    # (longer than reading a reply and typing the next message) and the summary sizes (the
    # summarizer's 600 characters) are ours.
    batch_tokens: int = Field(
        default=1000,
        alias="MEMORY_BATCH_TOKENS",
        ge=1,
        le=100_000,
        description="Extract a sender's waiting turns in a chat once their text reaches this "
        "many estimated tokens (user messages and replies, estimate × 1.10).",
    )
    batch_messages: int = Field(
        default=5,
        alias="MEMORY_BATCH_MESSAGES",
        ge=1,
        le=100,
        description="…or once this many user messages wait (1 = one extraction per turn).",
    )
    batch_quiet_s: float = Field(
        default=300.0,
        alias="MEMORY_BATCH_QUIET_S",
        gt=0,
        le=86_400,
        description="…or once the sender has written nothing in the chat for this many "
        "seconds (a job scheduled in the queue, so it survives restarts).",
    )
    batch_lookback_turns: int = Field(
        default=0,
        alias="MEMORY_BATCH_LOOKBACK_TURNS",
        ge=0,
        le=50,
        description="Newest turns of an active chat left out of a batch while they may still "
        "change; a quiet chat or a 'remember that …' request takes them too.",
    )
    chat_summary_tokens: int = Field(
        default=2000,
        alias="MEMORY_CHAT_SUMMARY_TOKENS",
        ge=0,
        le=100_000,
        description="A chat becomes long at this many estimated tokens of handed-over text and "
        "gets a rolling summary (a Chat Memory), updated every this many tokens "
        "and when the chat goes quiet; 0 = no summaries.",
    )
    chat_summary_max_chars: int = Field(
        default=600,
        alias="MEMORY_CHAT_SUMMARY_MAX_CHARS",
        ge=100,
        le=8000,
        description="Longest rolling chat summary in characters.",
    )
    worker_concurrency: int = Field(
        default=2,
        alias="MEMORY_WORKER_CONCURRENCY",
        ge=1,
        le=32,
        description="Extraction jobs run at once per worker.",
    )
    run_workers: bool = Field(
        default=True, alias="MEMORY_RUN_WORKERS", description="Run job workers in the API process."
    )

    @field_validator("llm_base_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    @property
    def llm_configured(self) -> bool:
        """True when extraction has an endpoint and a model."""
        return bool(self.llm_base_url and self.llm_model)

    def server_settings(self) -> dict[str, str]:
        """PostgreSQL settings every pooled connection starts with (storage.db.create_engine).

        hnsw.ef_search is the value the read path's HNSW scans use, so they need no SET.
        """
        from service.storage.memories import hnsw_ef_search

        return {"hnsw.ef_search": str(hnsw_ef_search(self.ann_ef_search, self.candidate_limit))}

    def bearer_key(self) -> str:
        """The API key: from the environment, else generated once into the state dir."""
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        path = self.state_dir / "api_key"
        if path.exists():
            return path.read_text(encoding="utf-8").strip()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(32)
        path.write_text(key + "\n", encoding="utf-8")
        path.chmod(0o600)
        return key

    def check_bind(self) -> None:
        """Refuse a non-loopback bind without an explicit key.

        Raises:
            ConfigurationError: when MEMORY_HOST is not loopback and MEMORY_API_KEY is unset.
        """
        try:
            loopback = ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            loopback = self.host == "localhost"
        if not loopback and (self.api_key is None or not self.api_key.get_secret_value()):
            raise ConfigurationError(
                f"MEMORY_HOST={self.host} is reachable from other machines; "
                "set MEMORY_API_KEY before binding beyond loopback."
            )

    # --- consolidation (DESIGN §8) -------------------------------------------------------
    consolidation_age_days: float = Field(
        default=7.0,
        alias="MEMORY_CONSOLIDATION_AGE_DAYS",
        ge=0,
        description="The daily summarizer merges only memories stated at least this many days ago.",
    )
    consolidation_strategy: str = Field(
        default="embeddings",
        alias="MEMORY_CONSOLIDATION_STRATEGY",
        pattern="^(embeddings|tags|hybrid)$",
        description="How memories are clustered: embeddings (greedy cosine), tags, or hybrid "
        "(cosine, closer by 0.1 when a tag is shared).",
    )
    consolidation_cosine: float = Field(
        default=0.85,
        alias="MEMORY_CONSOLIDATION_COSINE",
        ge=0,
        le=1,
        description="Minimum cosine of a memory to its cluster's centroid (lower merges more "
        "and costs recall; docs/howto/summarizer.md).",
    )
    consolidation_duplicate_cosine: float = Field(
        default=0.85,
        alias="MEMORY_CONSOLIDATION_DUPLICATE_COSINE",
        ge=0,
        le=1,
        description="Two memories this close (cosine) merge even without a third.",
    )
    consolidation_min_cluster: int = Field(
        default=3,
        alias="MEMORY_CONSOLIDATION_MIN_CLUSTER",
        ge=2,
        le=50,
        description="Fewest distinct memories merged into one summary.",
    )
    consolidation_max_cluster: int = Field(
        default=4,
        alias="MEMORY_CONSOLIDATION_MAX_CLUSTER",
        ge=2,
        le=50,
        description="Most memories merged into one summary.",
    )
    consolidation_summary_max_chars: int = Field(
        default=600,
        alias="MEMORY_SUMMARY_MAX_CHARS",
        ge=100,
        le=4000,
        description="Longest summary text in characters (its sources may fill 80 % of it).",
    )
    memory_cap: int = Field(
        default=200,
        alias="MEMORY_CAP",
        ge=1,
        description="Active memories per user or folder; beyond it the oldest or least "
        "relevant are archived.",
    )
    consolidation_trigger_share: float = Field(
        default=0.8,
        alias="MEMORY_CONSOLIDATION_TRIGGER",
        gt=0,
        le=1,
        description="At this share of the cap an extraction queues a consolidation of the owner.",
    )
    consolidation_free_share: float = Field(
        default=0.2,
        alias="MEMORY_CONSOLIDATION_FREE",
        gt=0,
        le=1,
        description="A limit-triggered consolidation frees this share of the cap.",
    )
    prune_strategy: str = Field(
        default="fifo",
        alias="MEMORY_PRUNE_STRATEGY",
        pattern="^(fifo|least_relevant)$",
        description="Which memories beyond the cap are archived first: fifo (oldest) or "
        "least_relevant (low confidence, long unused).",
    )
    consolidation_guard_share: float = Field(
        default=0.5,
        alias="MEMORY_CONSOLIDATION_GUARD",
        gt=0,
        le=1,
        description="A run that would lower an owner's active memories by more than this "
        "share (merged minus summaries, plus pruned) is refused.",
    )

    # --- reminders (issue #7) -------------------------------------------------------------
    reminder_similarity: float = Field(
        default=CONTEXT_SIMILARITY,
        alias="MEMORY_REMINDER_SIMILARITY",
        ge=0,
        le=1,
        description="A reminder set for a topic fires when a message is this close to it "
        "(relevance 1 - cosine_distance/2; 0.7 is cosine 0.4; seeds/003).",
    )

    # --- operations: logs (reliability and operations) -----------------------------------
    log_format: str = Field(
        default="text",
        alias="MEMORY_LOG_FORMAT",
        pattern="^(text|json)$",
        description="text (for people) or json (one JSON object per line, for log shippers); "
        "keys, tokens and codes are scrubbed from both.",
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings from the environment, built once per process."""
    return Settings()
