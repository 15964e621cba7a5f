"""Service settings, read from the environment (one table in docs/reference/settings.md)."""

from __future__ import annotations

import ipaddress
import json
import secrets
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.errors import ConfigurationError

CONTEXT_SIMILARITY = 0.7
"""MEMORY_REMINDER_SIMILARITY's default: a context reminder fires when a message's similarity
to its cue is at least this (seeds/003 "when semantic similarity to a cue exceeds 0.7";
issue #7). Similarity is the project's
1 - cosine_distance / 2 (the scale of DESIGN §6's 0.7, i.e. cosine ≥ 0.4): with
all-MiniLM-L6-v2, "What should I plant in my garden this spring?" is at cosine 0.52 to the cue
"the garden", unrelated chat below 0.35; a cosine of 0.7 is reached only by near-paraphrases
("Let's talk about the garden", 0.83)."""


class Settings(BaseSettings):
    """Every knob of the service. Defaults are the founding design's (DESIGN §11)."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", populate_by_name=True)

    # --- where things live -------------------------------------------------------------
    state_dir: Path = Field(
        default=Path(".state"),
        alias="MEMORY_STATE_DIR",
        description="Folder for the embedded PostgreSQL data and the generated API key.",
    )
    model_cache_dir: Path | None = Field(
        default=None,
        alias="MEMORY_MODEL_CACHE_DIR",
        description="Folder for the embedding model's ONNX file, written once and shared by "
        "every process of the installation (unset = `$XDG_CACHE_HOME/memory-service/onnx`, "
        "else `~/.cache/memory-service/onnx`).",
    )
    database_url: str | None = Field(
        default=None,
        alias="DATABASE_URL",
        description="PostgreSQL URL with pgvector; unset = embedded PostgreSQL in the state dir. "
        "Each connection starts with `-c hnsw.ef_search=…` in libpq `options` (behind a pooler, "
        "set MEMORY_DATABASE_POOLER and MEMORY_LISTEN_DATABASE_URL).",
    )
    database_pooler: Literal["none", "transaction"] = Field(
        default="none",
        alias="MEMORY_DATABASE_POOLER",
        description=(
            "`transaction` when DATABASE_URL goes through a pooler in transaction mode "
            "(PgBouncer): no libpq options, no prepared statements, settings per transaction, "
            "jobs found by polling instead of LISTEN "
            "([scaling](docs/scaling.md#behind-a-pooler-pgbouncer-in-transaction-mode))."
        ),
    )
    listen_database_url: str | None = Field(
        default=None,
        alias="MEMORY_LISTEN_DATABASE_URL",
        description=(
            "A direct (not pooled) PostgreSQL URL for LISTEN (cache notices across processes), "
            "migrations and per-owner index builds; unset = DATABASE_URL, which must then be "
            "direct."
        ),
    )
    db_pool_size: int = Field(
        default=10,
        alias="MEMORY_DB_POOL_SIZE",
        ge=1,
        le=200,
        description="Connections the service keeps open per process (plus as many overflow); "
        "one process opens at most 2 × this + MEMORY_JOBS_POOL_SIZE + 2, 26 by default "
        "([budget](docs/scaling.md#connections)).",
    )
    jobs_pool_size: int = Field(
        default=4,
        alias="MEMORY_JOBS_POOL_SIZE",
        ge=2,
        le=100,
        description="Connections of the job queue per process (procrastinate).",
    )
    host: str = Field(
        default="127.0.0.1",
        alias="MEMORY_HOST",
        description="Address to bind; beyond loopback only with MEMORY_API_KEY set.",
    )
    port: int = Field(
        default=8765, alias="MEMORY_PORT", ge=1, le=65535, description="Port to listen on."
    )
    api_key: SecretStr | None = Field(
        default=None,
        alias="MEMORY_API_KEY",
        description="Bearer key the filter must send; unset = generated once into "
        "`<state dir>/api_key` (`python -m service api-key` prints it).",
    )
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        alias="MEMORY_MAX_BODY_BYTES",
        gt=0,
        description=(
            "Largest request body accepted, in bytes (413 beyond); the default leaves room for "
            "a turn with six long messages. The key of a /v1 call is checked before its body "
            "is read."
        ),
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
    llm_max_answer_tokens: int = Field(
        default=1_500,
        alias="LLM_MAX_ANSWER_TOKENS",
        ge=64,
        le=32_768,
        description="Most tokens one LLM answer may have (max_tokens of every call is at most "
        "this): a small model that runs on costs minutes of CPU per call.",
    )
    llm_structured_output: Literal["auto", "json_schema", "schema_object", "json_object", "off"] = (
        Field(
            default="auto",
            alias="LLM_STRUCTURED_OUTPUT",
            description=(
                "How JSON answers are constrained: json_schema (OpenAI, vLLM, Ollama, llama.cpp), "
                "schema_object (llama-cpp-python's json_object + schema), json_object, off; auto "
                "tries them in that order and keeps the first the endpoint accepts. "
                "LLM_JSON_MODE=false means off."
            ),
        )
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
        default=1,
        alias="EMBEDDING_THREADS",
        ge=1,
        le=64,
        description="CPU threads for embedding (1 keeps latency steady on small machines).",
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
    adaptive_fusion: bool = Field(
        default=False,
        alias="MEMORY_ADAPTIVE_FUSION",
        description="Scale the full-text weight of the fusion by the share of the message's "
        "words its best full-text match holds (off: +4 points of R@10 on PrefEval, −4 on "
        "LoCoMo turns; docs/discussions/retrieval.md).",
    )
    nearest_reserve: int = Field(
        default=5,
        alias="MEMORY_NEAREST_RESERVE",
        ge=0,
        le=50,
        description="The nearest this many memories pass the relevance gate down to "
        "MEMORY_NEAREST_FLOOR (0 = off; 5: chosen on LoCoMo 0–4 and PrefEval users 0–9, "
        "docs/discussions/retrieval.md).",
    )
    nearest_floor: float = Field(
        default=0.6,
        alias="MEMORY_NEAREST_FLOOR",
        ge=0,
        le=1,
        description="Minimum relevance of a reserved nearest memory (0.6 ⇔ cosine 0.2).",
    )
    fusion_evidence: Literal["fixed", "coverage", "idf", "agreement"] = Field(
        default="fixed",
        alias="MEMORY_FUSION_EVIDENCE",
        description="The keyword evidence that scales the full-text weight of the fusion per "
        "message: fixed (none), coverage (as MEMORY_ADAPTIVE_FUSION), idf (the idf share of "
        "the message's words its best full-text match holds) or agreement (the share of the "
        "10 best full-text matches among the 10 nearest). fixed by default: idf adds 10 "
        "points of R@1 on PrefEval users 0–9 but costs LoCoMo 0–4 turns 1.2 (agreement 8–12 "
        "points of R@10, coverage 4); docs/discussions/retrieval.md.",
    )
    evidence_full: float = Field(
        default=0.5,
        alias="MEMORY_EVIDENCE_FULL",
        gt=0,
        le=1,
        description="Keyword evidence at or above which the full-text weight stays whole "
        "(below it the weight is scaled linearly); see MEMORY_FUSION_EVIDENCE. 0.5: chosen "
        "from 0.3 / 0.5 on LoCoMo 0–4 and PrefEval users 0–9 (bench/levers_adaptive.py).",
    )
    nearest_fill: bool = Field(
        default=True,
        alias="MEMORY_NEAREST_FILL",
        description="Fill what the budget leaves after the relevance gate with the nearest "
        "memories down to MEMORY_NEAREST_FLOOR, nearest first (on: +3.4 points of the block "
        "on PrefEval users 0–9, nothing on LoCoMo 0–4, whose blocks are full); "
        "docs/discussions/retrieval.md.",
    )
    fill_margin: float = Field(
        default=0.3,
        alias="MEMORY_FILL_MARGIN",
        ge=0,
        le=2,
        description="With MEMORY_NEAREST_FILL, a memory within this cosine of the message's "
        "nearest memory fills too, below MEMORY_NEAREST_FLOOR, when that nearest memory is "
        "above the floor (0 = the floor only). 0.3: chosen from 0.1 / 0.2 / 0.3 on PrefEval "
        "users 0–9 (block 93.0 / 96.8 / 97.8 %); docs/discussions/retrieval.md.",
    )
    fill_margin_from: float = Field(
        default=0.4,
        alias="MEMORY_FILL_MARGIN_FROM",
        ge=-1,
        le=1,
        description="The cosine the message's nearest memory needs before MEMORY_FILL_MARGIN "
        "applies. 0.4 (the relevance gate's cosine): at 0.2, 25 % of generic requests "
        '("Summarize this article for me") got 8 or more unrelated memories '
        "(bench/fill_noise.py); docs/discussions/retrieval.md.",
    )
    long_memory_chars: int = Field(
        default=0,
        alias="MEMORY_LONG_MEMORY_CHARS",
        ge=0,
        le=100_000,
        description="Memories longer than this many characters are also scored by their best "
        "sentence (0 = off, the default: 300 cost 0.8 points of the LoCoMo turns block; "
        "docs/discussions/retrieval.md).",
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
        le=8_000,  # as the API's budget_tokens (api/schemas.py)
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
    llm_planted_check: bool = Field(
        default=True,
        alias="MEMORY_LLM_PLANTED_CHECK",
        description="With an LLM configured, let it judge candidate memories that the "
        "planted-instruction rules and the semantic check leave in doubt (write path only).",
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
    extraction_support_check: bool = Field(
        default=True,
        alias="MEMORY_EXTRACTION_SUPPORT_CHECK",
        description=(
            "Drop an extracted fact the user's own messages do not back: invented by the "
            "model, or taken from the assistant's reply (docs/performance.md, \"Extraction "
            'with sloppy models").'
        ),
    )
    extraction_max_attempts: int = Field(
        default=5,
        alias="MEMORY_EXTRACTION_ATTEMPTS",
        ge=1,
        le=20,
        description="Tries of an extraction job failing for another reason than an "
        "unreachable LLM before its turn is marked failed.",
    )
    extraction_retry_base_s: float = Field(
        default=4.0,
        alias="MEMORY_EXTRACTION_RETRY_BASE_S",
        gt=0,
        le=3_600,
        description="Wait after a first failed extraction (LLM down); doubles each time.",
    )
    extraction_retry_max_wait_s: float = Field(
        default=300.0,
        alias="MEMORY_EXTRACTION_RETRY_MAX_WAIT_S",
        gt=0,
        le=86_400,
        description="Longest wait between two tries while the LLM is down: a backlog "
        "drains this soon after the LLM is back.",
    )
    extraction_give_up_after_s: float = Field(
        default=86_400.0,
        alias="MEMORY_EXTRACTION_GIVE_UP_S",
        gt=0,
        le=30 * 86_400,
        description="A turn waiting this long (its waits added up) for an unreachable LLM "
        "is marked failed (turns retry-failed takes it again).",
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
        le=2_000,  # a memory holds at most this (core/limits.MAX_FACT_CHARS)
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
        default=True,
        alias="MEMORY_RUN_WORKERS",
        description="Run the job workers inside the API process (`false` for API replicas "
        "beside `python -m service worker` processes).",
    )
    worker_process: bool = Field(
        default=True,
        alias="MEMORY_WORKER_PROCESS",
        description="With MEMORY_RUN_WORKERS, `serve` runs the job workers in a child "
        "`worker` process it starts and stops with itself (the child stops when `serve` "
        "dies; `/readyz` names its state) instead of in the API process "
        "([scaling](docs/scaling.md#workers-in-the-api-process-or-beside-it)).",
    )
    worker_nice: int = Field(
        default=10,
        alias="MEMORY_WORKER_NICE",
        ge=0,
        le=19,
        description="How much lower a `worker` process schedules itself (Linux nice "
        "increment, applied at its start) and, on this installation's embedded PostgreSQL, "
        "the server processes of its own connections; 0 = unchanged.",
    )

    @field_validator("llm_base_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    def environment(self) -> dict[str, str]:
        """These settings as environment variables ({alias: text}; unset ones left out), for a
        child process that must run with the same ones (`serve`'s worker process).
        """
        env: dict[str, str] = {}
        for name, spec in type(self).model_fields.items():
            value = getattr(self, name)
            if value is None or spec.alias is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            if isinstance(value, bool):
                env[spec.alias] = "true" if value else "false"
            elif isinstance(value, list | tuple | dict | set):
                env[spec.alias] = json.dumps(list(value) if isinstance(value, set) else value)
            else:
                env[spec.alias] = str(value)
        return env

    @property
    def llm_configured(self) -> bool:
        """True when extraction has an endpoint and a model."""
        return bool(self.llm_base_url and self.llm_model)

    def connection_budget(self) -> int:
        """Most PostgreSQL connections one service process opens: the pool and as many
        overflow, the job queue's pool, the cache-notice listener and the per-owner index
        refresh (docs/scaling.md sets this against `max_connections`). `serve` with
        MEMORY_WORKER_PROCESS is two such processes.
        """
        return 2 * self.db_pool_size + self.jobs_pool_size + 2

    def bearer_key(self) -> str:
        """The API key: from the environment, else generated once into the state dir."""
        return self.bearer_key_origin()[0]

    def bearer_key_origin(self) -> tuple[str, str]:
        """(the API key, where it came from): "environment", "state_dir" or "generated".

        "generated" only on the call that wrote the key into `<state_dir>/api_key`; the start
        banner prints the key then and only then.
        """
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value(), "environment"
        path = self.state_dir / "api_key"
        if path.exists():
            return path.read_text(encoding="utf-8").strip(), "state_dir"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(32)
        path.write_text(key + "\n", encoding="utf-8")
        path.chmod(0o600)
        return key, "generated"

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
        le=2_000,  # a memory holds at most this (core/limits.MAX_FACT_CHARS)
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
