"""One ``Settings`` for every Spindle process, read from the environment.

Every field is read from ``SPINDLE_<NAME>``; the connection URLs also accept the
conventional unprefixed names (``REDIS_URL``, ``MONGO_URL``, ``TEMPORAL_ADDRESS``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

JwtAlgorithm = Literal["HS256", "RS256"]
JWT_ALGORITHMS: tuple[JwtAlgorithm, ...] = ("HS256", "RS256")


def _env(name: str, *plain: str) -> AliasChoices:
    return AliasChoices(f"SPINDLE_{name}", *plain)


class ModelPrice(BaseModel):
    """What one model costs (``Settings.model_prices``)."""

    model_config = ConfigDict(extra="forbid")

    input_per_1k: float = Field(0.0, ge=0, description="USD per 1,000 prompt tokens")
    output_per_1k: float = Field(0.0, ge=0, description="USD per 1,000 completion tokens")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for one turn's tokens."""
        return (prompt_tokens * self.input_per_1k + completion_tokens * self.output_per_1k) / 1000


class Settings(BaseSettings):
    """Configuration shared by the worker, the gateway and the CLI."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    # Temporal
    temporal_address: str = Field(
        "127.0.0.1:7233",
        description="Temporal frontend (gRPC) address, host:port",
        validation_alias=_env("TEMPORAL_ADDRESS", "TEMPORAL_ADDRESS"),
    )
    temporal_namespace: str = Field(
        "default",
        description="Temporal namespace the runs live in",
        validation_alias=_env("TEMPORAL_NAMESPACE", "TEMPORAL_NAMESPACE"),
    )
    task_queue: str = Field(
        "spindle",
        description="Task queue the worker polls and the gateway starts runs on",
        validation_alias=_env("TASK_QUEUE"),
    )
    temporal_ui_url: str = Field(
        "http://127.0.0.1:8233",
        description="Temporal Web UI address, for links to a run's history",
        validation_alias=_env("TEMPORAL_UI_URL"),
    )
    continue_as_new_after_events: int | None = Field(
        None,
        ge=100,
        description="A graph run continues as new at a node boundary once its history has "
        "this many events (also whenever Temporal suggests it); unset: only when suggested",
        validation_alias=_env("CONTINUE_AS_NEW_AFTER_EVENTS"),
    )

    # Redis message bus
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description=(
            "Redis of the message bus (live stream and recent history): "
            "`redis://host:port/db`, a cluster `redis+cluster://host:port,host:port`, or "
            "Sentinel `redis+sentinel://host:port,host:port/<master>/<db>` (`rediss…` for TLS)"
        ),
        validation_alias=_env("REDIS_URL", "REDIS_URL"),
    )
    history_max_messages: int = Field(
        1000,
        ge=10,
        description="Messages kept per run in Redis; older ones are served from the archive",
        validation_alias=_env("HISTORY_MAX_MESSAGES"),
    )
    history_ttl_days: int = Field(
        90,
        ge=1,
        description="Days a run's messages stay in Redis after its last message",
        validation_alias=_env("HISTORY_TTL_DAYS"),
    )

    # MongoDB archive
    mongo_url: str = Field(
        "mongodb://127.0.0.1:27017",
        description="MongoDB server of the archive (runs, messages, node reports, graphs)",
        validation_alias=_env("MONGO_URL", "MONGO_URL"),
    )
    mongo_db: str = Field(
        "spindle",
        description="MongoDB database name",
        validation_alias=_env("MONGO_DB", "MONGO_DB"),
    )
    mongo_write_concern: str = Field(
        "majority",
        pattern=r"^(majority|[1-9][0-9]*|[A-Za-z][\w-]*)$",
        description=(
            "Write concern `w` of every Spindle write to MongoDB (archive, task store, "
            "files, API keys): `majority`, a number of members, or a tag set name; "
            "overrides a `w` in the URL"
        ),
        validation_alias=_env("MONGO_WRITE_CONCERN"),
    )
    mongo_read_concern: Literal["local", "majority", "available", "linearizable"] = Field(
        "majority",
        description=(
            "Read concern of Spindle's MongoDB reads; `majority` never returns a write a "
            "replica-set failover could roll back"
        ),
        validation_alias=_env("MONGO_READ_CONCERN"),
    )
    archive_enabled: bool = Field(
        True,
        description="Archive runs, messages and node reports in MongoDB",
        validation_alias=_env("ARCHIVE_ENABLED"),
    )
    archive_port_data_max_bytes: int = Field(
        16_384,
        ge=0,
        description="Largest node output (JSON bytes) kept in a run document's portData; "
        "a larger one is kept as a summary (its node report has it whole)",
        validation_alias=_env("ARCHIVE_PORT_DATA_MAX_BYTES"),
    )

    # Gateway
    gateway_host: str = Field(
        "127.0.0.1",
        description="Address the gateway listens on",
        validation_alias=_env("GATEWAY_HOST"),
    )
    gateway_port: int = Field(
        8000, description="Port the gateway listens on", validation_alias=_env("GATEWAY_PORT")
    )
    public_url: str | None = Field(
        None,
        description="The gateway URL as clients reach it (behind a proxy); default: host and port",
        validation_alias=_env("PUBLIC_URL"),
    )
    sse_keepalive_seconds: float = Field(
        15.0,
        gt=0,
        description="Seconds between SSE keep-alive comments on an idle stream",
        validation_alias=_env("SSE_KEEPALIVE_SECONDS"),
    )
    sse_closed_check_keepalives: int = Field(
        4,
        ge=0,
        description=(
            "Every this many keep-alives, an idle SSE stream asks Temporal whether its run "
            "was closed from outside Spindle (then TERMINATED is posted and the stream ends); "
            "0: never"
        ),
        validation_alias=_env("SSE_CLOSED_CHECK_KEEPALIVES"),
    )
    closed_run_sweep_seconds: float = Field(
        30.0,
        ge=0,
        description=(
            "Seconds between the gateway's sweeps over non-terminal run documents that "
            "notice runs Temporal closed without Spindle (terminate, cancel, limits, "
            "timeouts) and update the history gauges; 0: no sweep"
        ),
        validation_alias=_env("CLOSED_RUN_SWEEP_SECONDS"),
    )
    closed_run_sweep_batch: int = Field(
        200,
        ge=1,
        le=10_000,
        description=(
            "Most non-terminal run documents one sweep looks at (least recently updated first)"
        ),
        validation_alias=_env("CLOSED_RUN_SWEEP_BATCH"),
    )
    sse_shutdown_retry_ms: int = Field(
        1000,
        ge=0,
        le=60_000,
        description=(
            "Reconnection delay (SSE retry) hinted to clients whose stream a stopping gateway "
            "ends; each stream gets a random delay from this to twice this, so the clients "
            "spread over the other gateways"
        ),
        validation_alias=_env("SSE_SHUTDOWN_RETRY_MS"),
    )
    gateway_graceful_shutdown_seconds: int = Field(
        10,
        ge=1,
        description=(
            "Seconds a stopping gateway lets open requests finish before it cancels them "
            "(SSE streams end at once, with a retry hint); keep it below the pod's "
            "terminationGracePeriodSeconds"
        ),
        validation_alias=_env("GATEWAY_GRACEFUL_SHUTDOWN_SECONDS"),
    )
    history_gzip_level: int = Field(
        1,
        ge=1,
        le=9,
        description="gzip level of history responses (1 is fastest, 9 smallest)",
        validation_alias=_env("HISTORY_GZIP_LEVEL"),
    )
    max_body_bytes: int = Field(
        1_048_576,
        ge=1024,
        description="Largest request body the gateway accepts, in bytes",
        validation_alias=_env("MAX_BODY_BYTES"),
    )

    # Auth and tenants
    auth_disabled: bool = Field(
        False,
        description=(
            "Switch authentication off (development only): every request acts as user "
            "'dev' of tenant 'default'. `spindle dev` sets it and says so at start-up"
        ),
        validation_alias=_env("AUTH_DISABLED"),
    )
    auth_secret: str | None = Field(
        None,
        description=(
            "Server secret that signs stream tokens and peppers API-key hashes; "
            "required when auth is on (use 32+ random bytes)"
        ),
        validation_alias=_env("AUTH_SECRET"),
    )
    jwt_algorithms: list[JwtAlgorithm] = Field(
        default_factory=lambda: list(JWT_ALGORITHMS),
        description="JWT algorithms accepted (JSON list)",
        validation_alias=_env("JWT_ALGORITHMS"),
    )
    jwt_secret: str | None = Field(
        None,
        description="HS256 shared secret of bearer JWTs; unset: HS256 tokens are refused",
        validation_alias=_env("JWT_SECRET"),
    )
    jwt_public_key: str | None = Field(
        None,
        description="RS256 public key (PEM) of bearer JWTs",
        validation_alias=_env("JWT_PUBLIC_KEY"),
    )
    jwt_jwks_url: str | None = Field(
        None,
        description="JWKS URL that serves the RS256 keys of bearer JWTs (keys picked by kid)",
        validation_alias=_env("JWT_JWKS_URL"),
    )
    jwt_issuer: str | None = Field(
        None,
        description="Required `iss` of bearer JWTs",
        validation_alias=_env("JWT_ISSUER"),
    )
    jwt_audience: str | None = Field(
        None,
        description="Required `aud` of bearer JWTs",
        validation_alias=_env("JWT_AUDIENCE"),
    )
    jwt_tenant_claim: str = Field(
        "tenant",
        description="JWT claim that names the caller's tenant",
        validation_alias=_env("JWT_TENANT_CLAIM"),
    )
    jwt_roles_claim: str = Field(
        "roles",
        description="JWT claim that lists the caller's roles",
        validation_alias=_env("JWT_ROLES_CLAIM"),
    )
    run_control_roles: list[str] = Field(
        default_factory=lambda: ["admin"],
        description=(
            "Roles that may answer, steer, cancel or terminate any run of their tenant "
            "(the run's owner always may); JSON list"
        ),
        validation_alias=_env("RUN_CONTROL_ROLES"),
    )
    graph_write_roles: list[str] = Field(
        default_factory=lambda: ["admin", "graph-editor"],
        description=(
            "Roles that may register or replace graphs of their tenant (`PUT /graphs/{name}`); "
            "JSON list. Reading and running graphs needs no role"
        ),
        validation_alias=_env("GRAPH_WRITE_ROLES"),
    )
    auth_failure_limit: int = Field(
        20,
        ge=1,
        description=(
            "Failed authentications one client address may make per "
            "`auth_failure_window_seconds`; then every request of that address gets 429 "
            "with Retry-After until the window ends (counted in Redis, shared by all gateways)"
        ),
        validation_alias=_env("AUTH_FAILURE_LIMIT"),
    )
    auth_failure_window_seconds: int = Field(
        60,
        ge=1,
        le=86_400,
        description="The window of `auth_failure_limit`, in seconds",
        validation_alias=_env("AUTH_FAILURE_WINDOW_SECONDS"),
    )
    api_key_cache_seconds: float = Field(
        10.0,
        ge=0,
        description="Seconds a gateway trusts a verified API key before asking MongoDB again "
        "(a revoked key stops working within this time)",
        validation_alias=_env("API_KEY_CACHE_SECONDS"),
    )
    stream_token_ttl_seconds: int = Field(
        300,
        ge=10,
        le=86_400,
        description="Lifetime of a signed stream token (browsers' EventSource)",
        validation_alias=_env("STREAM_TOKEN_TTL_SECONDS"),
    )

    # Limits
    rate_limit_run_starts: int = Field(
        60,
        ge=1,
        description="Run starts a tenant may make per minute (then 429 with Retry-After)",
        validation_alias=_env("RATE_LIMIT_RUN_STARTS"),
    )
    schedule_backfill_max_days: int = Field(
        31,
        ge=1,
        le=3660,
        description=(
            "Longest span one schedule backfill may cover (its runs start inside Temporal, "
            "past the per-tenant run-start limit)"
        ),
        validation_alias=_env("SCHEDULE_BACKFILL_MAX_DAYS"),
    )
    rate_limit_signals: int = Field(
        600,
        ge=1,
        description="Signals a tenant may send per minute (then 429 with Retry-After)",
        validation_alias=_env("RATE_LIMIT_SIGNALS"),
    )
    max_streams_per_tenant: int = Field(
        500,
        ge=1,
        description="Concurrent SSE streams one tenant may hold open (then 429)",
        validation_alias=_env("MAX_STREAMS_PER_TENANT"),
    )
    jsonrpc_max_batch: int = Field(
        50,
        ge=1,
        le=10_000,
        description=(
            "Most members one JSON-RPC batch may hold; a longer batch is refused whole "
            "(-32600) before any member runs"
        ),
        validation_alias=_env("JSONRPC_MAX_BATCH"),
    )
    max_live_workstreams: int = Field(
        32,
        ge=1,
        le=10_000,
        description=(
            "Workstreams one run may have running at once; a launch past it is refused "
            "(the agent or tool gets the error, the run goes on)"
        ),
        validation_alias=_env("MAX_LIVE_WORKSTREAMS"),
    )

    # Outbound calls to caller-chosen URLs (push notifications)
    outbound_allow: str = Field(
        "",
        description=(
            "Comma-separated host names and CIDRs that outbound URLs may reach although "
            "the policy refuses them by default (loopback, private, link-local, metadata "
            "addresses); e.g. `127.0.0.0/8,::1/128` (what `spindle dev` sets)"
        ),
        validation_alias=_env("OUTBOUND_ALLOW"),
    )
    mcp_stdio_commands: list[str] = Field(
        default_factory=list,
        description=(
            "Command lines (JSON list of strings, split like a shell) that agent nodes may "
            "start as stdio MCP servers on the worker; a graph's `command` + `args` must equal "
            "one of them exactly. Empty: no stdio MCP server may run (tenants never run "
            "arbitrary commands)"
        ),
        validation_alias=_env("MCP_STDIO_COMMANDS"),
    )
    mcp_tools_cache_seconds: float = Field(
        300.0,
        ge=0,
        description="How long a worker reuses an MCP server's tool list before listing again",
        validation_alias=_env("MCP_TOOLS_CACHE_SECONDS"),
    )
    mcp_timeout_seconds: float = Field(
        60.0,
        gt=0,
        description="Longest wait for an MCP server: connecting, listing tools or one tool call",
        validation_alias=_env("MCP_TIMEOUT_SECONDS"),
    )
    mcp_per_destination: int = Field(
        4,
        ge=1,
        le=1000,
        description=(
            "MCP calls one worker process has in flight at once to one streamable-HTTP "
            "server (host and port); more wait for a slot within mcp_timeout_seconds"
        ),
        validation_alias=_env("MCP_PER_DESTINATION"),
    )
    mcp_breaker_failures: int = Field(
        5,
        ge=1,
        description=(
            "Consecutive failed connections to one MCP HTTP server (host and port) that "
            "open its breaker: calls to it are refused at once for mcp_breaker_seconds"
        ),
        validation_alias=_env("MCP_BREAKER_FAILURES"),
    )
    mcp_breaker_seconds: float = Field(
        30.0,
        gt=0,
        description="How long an open breaker refuses calls to a failing MCP HTTP server",
        validation_alias=_env("MCP_BREAKER_SECONDS"),
    )

    push_timeout_seconds: float = Field(
        5.0,
        gt=0,
        le=60,
        description="Timeout of one push notification POST (connect, send and answer)",
        validation_alias=_env("PUSH_TIMEOUT_SECONDS"),
    )
    push_max_in_flight: int = Field(
        64,
        ge=1,
        le=10_000,
        description="Push POSTs one worker process has in flight at once, across destinations",
        validation_alias=_env("PUSH_MAX_IN_FLIGHT"),
    )
    push_per_destination: int = Field(
        4,
        ge=1,
        le=1000,
        description="Push POSTs in flight at once to one destination (host and port)",
        validation_alias=_env("PUSH_PER_DESTINATION"),
    )
    push_breaker_failures: int = Field(
        5,
        ge=1,
        description=(
            "Consecutive failed pushes to one destination that open its breaker "
            "(its deliveries wait push_breaker_seconds)"
        ),
        validation_alias=_env("PUSH_BREAKER_FAILURES"),
    )
    push_breaker_seconds: float = Field(
        30.0,
        gt=0,
        description="How long an open breaker holds a failing destination's deliveries",
        validation_alias=_env("PUSH_BREAKER_SECONDS"),
    )
    max_message_bytes: int = Field(
        262_144,
        ge=1024,
        description="Largest single message a run may post; longer text is cut and marked",
        validation_alias=_env("MAX_MESSAGE_BYTES"),
    )
    max_answer_bytes: int = Field(
        65_536,
        ge=1024,
        description="Largest answer to a prompt (its data and message as JSON), in bytes "
        "(more is refused with a 422 and the prompt keeps waiting)",
        validation_alias=_env("MAX_ANSWER_BYTES"),
    )
    max_header_bytes: int = Field(
        65_536,
        ge=1024,
        description="Largest request line plus headers the gateway reads, in bytes "
        "(more is answered 431 and the connection closed)",
        validation_alias=_env("MAX_HEADER_BYTES"),
    )
    max_upload_bytes: int = Field(
        26_214_400,
        ge=1024,
        description="Largest file upload, in bytes",
        validation_alias=_env("MAX_UPLOAD_BYTES"),
    )
    payload_offload_bytes: int = Field(
        131_072,
        ge=1024,
        description=(
            "Temporal payloads larger than this are stored in MongoDB (GridFS) and "
            "passed by reference, far below Temporal's 2 MB limit"
        ),
        validation_alias=_env("PAYLOAD_OFFLOAD_BYTES"),
    )
    item_batch_size: int = Field(
        200,
        ge=1,
        le=5000,
        description=(
            "Items of a map node per batch activity (and per stored page): history "
            "grows per batch, never per item"
        ),
        validation_alias=_env("ITEM_BATCH_SIZE"),
    )

    # Conversation web page (GET /ui/)
    ui_upload_accept: str = Field(
        "",
        max_length=2000,
        description=(
            "File types the web page offers to upload, as an HTML accept list "
            "(e.g. '.pdf,.csv,image/*'); empty: any. A page convenience, not a server check"
        ),
        validation_alias=_env("UI_UPLOAD_ACCEPT"),
    )
    ui_upload_max_files: int = Field(
        5,
        ge=1,
        le=100,
        description="Most files the web page uploads in one pick or drop",
        validation_alias=_env("UI_UPLOAD_MAX_FILES"),
    )

    # LLM
    llm_provider: Literal["offline", "openai"] = Field(
        "offline",
        description="offline (deterministic, no API key) or openai (any OpenAI-compatible API)",
        validation_alias=_env("LLM_PROVIDER"),
    )
    openai_base_url: str | None = Field(
        None,
        description="Base URL of the OpenAI-compatible API (vLLM, Ollama, a proxy); unset: OpenAI",
        validation_alias=_env("OPENAI_BASE_URL", "OPENAI_BASE_URL"),
    )
    openai_api_key: str | None = Field(
        None,
        description="API key of the OpenAI-compatible API",
        validation_alias=_env("OPENAI_API_KEY", "OPENAI_API_KEY"),
    )
    openai_model: str = Field(
        "gpt-4o-mini",
        description="Model name for the OpenAI-compatible API",
        validation_alias=_env("OPENAI_MODEL"),
    )
    openai_stream_usage: bool = Field(
        True,
        description=(
            "Ask the OpenAI-compatible API for token usage in the last chunk of a stream "
            "(stream_options.include_usage); turn off for servers that reject it"
        ),
        validation_alias=_env("OPENAI_STREAM_USAGE"),
    )
    model_prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description=(
            'Price per model for budgets\' max_cost_usd, JSON: {"<model>": {"input_per_1k": '
            'USD per 1,000 prompt tokens, "output_per_1k": USD per 1,000 completion tokens}}; '
            '"*" prices any model not listed; an unpriced model costs 0'
        ),
        validation_alias=_env("MODEL_PRICES"),
    )
    llm_streaming: bool = Field(
        True,
        description=(
            "Stream LLM tokens to clients as STREAMING_CHUNK messages; off: only the "
            "final THOUGHT/ANSWER is posted"
        ),
        validation_alias=_env("LLM_STREAMING"),
    )
    stream_chunk_interval_ms: float = Field(
        16.0,
        gt=0,
        description="Longest time a streamed token waits before it is posted in a chunk",
        validation_alias=_env("STREAM_CHUNK_INTERVAL_MS"),
    )
    stream_chunk_max_chars: int = Field(
        200,
        ge=1,
        description="Most characters in one STREAMING_CHUNK; a fuller buffer is posted at once",
        validation_alias=_env("STREAM_CHUNK_MAX_CHARS"),
    )
    offline_token_delay_ms: float = Field(
        0.0,
        ge=0,
        description=(
            "Pause of the offline model before each token it streams (0: as fast as it "
            "can; ~20 looks like a hosted model)"
        ),
        validation_alias=_env("OFFLINE_TOKEN_DELAY_MS"),
    )

    # Worker
    worker_event_loop: Literal["uvloop", "asyncio"] = Field(
        "uvloop",
        description=(
            "The worker process's event loop: uvloop (where it is installed; the "
            "standard loop elsewhere) or the standard asyncio loop "
            "(docs/operations/scaling.md#worker-event-loop)"
        ),
        validation_alias=_env("WORKER_EVENT_LOOP"),
    )
    worker_max_concurrent_activities: int = Field(
        200,
        ge=1,
        description="Activities one worker process runs at once",
        validation_alias=_env("WORKER_MAX_CONCURRENT_ACTIVITIES"),
    )
    worker_graceful_shutdown_seconds: float = Field(
        30.0,
        gt=0,
        description=(
            "Seconds a stopping worker (SIGTERM) lets running activities finish before it "
            "cancels them; it polls no new work meanwhile. Keep it below the pod's "
            "terminationGracePeriodSeconds"
        ),
        validation_alias=_env("WORKER_GRACEFUL_SHUTDOWN_SECONDS"),
    )
    worker_task_queues: list[str] = Field(
        default_factory=list,
        description=(
            "Task queues this worker polls; the main queue (SPINDLE_TASK_QUEUE) runs "
            "workflows and activities, any other only the activities of nodes routed to "
            "it (task_queue / task_queues in a graph); empty: the main queue; JSON list"
        ),
        validation_alias=_env("WORKER_TASK_QUEUES"),
    )
    worker_metrics_port: int = Field(
        9464,
        ge=0,
        le=65534,
        description=(
            "Port of the worker's Prometheus metrics (GET /metrics); the Temporal SDK's "
            "own metrics are served on the next port; 0: off"
        ),
        validation_alias=_env("WORKER_METRICS_PORT"),
    )
    worker_metrics_host: str = Field(
        "127.0.0.1",
        description="Address the worker's metrics ports listen on (0.0.0.0 for a scraper)",
        validation_alias=_env("WORKER_METRICS_HOST"),
    )

    # Logging
    log_level: str = Field(
        "INFO",
        description="Log level of the worker and the gateway (DEBUG, INFO, WARNING, ERROR)",
        validation_alias=_env("LOG_LEVEL"),
    )
    log_format: Literal["auto", "json", "text"] = Field(
        "auto",
        description="Log line format: json, text, or auto (text on a terminal, else JSON lines)",
        validation_alias=_env("LOG_FORMAT"),
    )
    log_redact_keys: list[str] = Field(
        default_factory=list,
        description=(
            "Extra key fragments whose values are masked in logged payloads "
            "(token, secret, password, api_key, authorization always are); JSON list"
        ),
        validation_alias=_env("LOG_REDACT_KEYS"),
    )
    log_payload_max_chars: int = Field(
        2000,
        ge=16,
        description="Longest payload snapshot in a log line, in characters",
        validation_alias=_env("LOG_PAYLOAD_MAX_CHARS"),
    )

    @field_validator("outbound_allow")
    @classmethod
    def _outbound_allow_parses(cls, value: str) -> str:
        # Refused at startup, not at the first push.
        from spindle.shared.platform.outbound import OutboundPolicy

        OutboundPolicy.parse(value)
        return value

    @property
    def base_url(self) -> str:
        """The gateway's address as clients should use it (never 0.0.0.0)."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.gateway_host in ("0.0.0.0", "::") else self.gateway_host
        return f"http://{host}:{self.gateway_port}"


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
