"""Settings that bound what a tenant, a run or a request may use."""

from __future__ import annotations

from pydantic import BaseModel, Field

from spindle.shared.platform.settings_sections.env_names import spindle_env as _env


class RateLimitSettings(BaseModel):
    """Per-tenant rates and per-run counts (refused past them)."""

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


class SizeLimitSettings(BaseModel):
    """Largest messages, answers, headers, uploads, payloads and item batches."""

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


class WebPageSettings(BaseModel):
    """The conversation web page (GET /ui/)."""

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
