"""Settings that bound what a tenant, a run or a request may use."""

from __future__ import annotations

from pydantic import BaseModel, Field

from spindle.shared.contracts.envelope import SHARED_STATE_MAX_BYTES
from spindle.shared.graphs.expressions import (
    DEFAULT_NODE_STEPS,
    DEFAULT_WORKFLOW_TASK_STEPS,
    MAX_EVALUATION_STEPS,
    MAX_WORKFLOW_TASK_STEPS,
)
from spindle.shared.platform.settings_sections.env_names import spindle_env as _env


class RateLimitSettings(BaseModel):
    """Per-tenant rates and per-run counts (refused past them)."""

    rate_limit_run_starts: int = Field(
        60,
        ge=1,
        description=(
            "Run starts a tenant may make per minute (then 429 with Retry-After). The runs "
            "a schedule starts on its timetable count too: the worker takes their permits "
            "(over it: the run fails with RunStartLimited), so give the gateway and the "
            "workers the same value"
        ),
        validation_alias=_env("RATE_LIMIT_RUN_STARTS"),
    )
    schedule_backfill_max_days: int = Field(
        31,
        ge=1,
        le=3660,
        description=(
            "Longest span one schedule backfill may cover (longer: 422 naming this setting)"
        ),
        validation_alias=_env("SCHEDULE_BACKFILL_MAX_DAYS"),
    )
    schedule_backfill_max_runs: int = Field(
        100,
        ge=1,
        le=500,
        description=(
            "Most runs one schedule backfill may start; a backfill whose span holds more "
            "start times is refused with 422 naming this setting (so is one larger than "
            "`rate_limit_run_starts`). Each run takes one run-start permit, all before any "
            "starts: a backfill the tenant's permits left cannot cover gets 429"
        ),
        validation_alias=_env("SCHEDULE_BACKFILL_MAX_RUNS"),
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
    ws_send_queue: int = Field(
        256,
        ge=1,
        le=100_000,
        description=(
            "Messages (responses and stream notifications) one /ws connection may have "
            "waiting to be sent; a producer waits while it is full, so a slow client "
            "slows its own streams and nothing is dropped"
        ),
        validation_alias=_env("WS_SEND_QUEUE"),
    )
    ws_max_calls: int = Field(
        16,
        ge=1,
        le=10_000,
        description=(
            "Calls one /ws connection may have in flight at once (streams included); "
            "one more is answered -32000 at once"
        ),
        validation_alias=_env("WS_MAX_CALLS"),
    )
    ws_max_message_bytes: int = Field(
        1_048_576,
        ge=1024,
        # uvicorn's own frame cap (ws_max_size) is 16 MiB.
        le=16 * 1_048_576,
        description="Largest text frame /ws accepts; a larger one closes the connection (1009)",
        validation_alias=_env("WS_MAX_MESSAGE_BYTES"),
    )
    mcp_tasks_page_size: int = Field(
        50,
        ge=1,
        le=500,
        description="Tasks (runs) one MCP tasks/list page holds; nextCursor pages on",
        validation_alias=_env("MCP_TASKS_PAGE_SIZE"),
    )
    mcp_task_poll_ms: int = Field(
        2000,
        ge=100,
        le=600_000,
        description="pollInterval (ms) MCP task answers suggest to clients polling tasks/get",
        validation_alias=_env("MCP_TASK_POLL_MS"),
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
    max_node_visits: int = Field(
        100_000,
        ge=1,
        le=1_000_000_000,
        description=(
            "Most executions of any one node in a run: a graph whose loop bounds "
            "(max_iterations, max_visits) allow more is refused (422, rule "
            "exceeds_max_node_visits), and a run that gets there anyway fails "
            "(NodeVisitsExceeded); a node's own bounds below it are the bound"
        ),
        validation_alias=_env("MAX_NODE_VISITS"),
    )
    evaluation_max_runs: int = Field(
        1000,
        ge=1,
        le=100_000,
        description=(
            "Most source runs one evaluation (POST /evaluations) may fork; a request "
            "listing or querying more is refused (422), a query's limit defaults to it "
            "(docs/replay-and-compare.md#evaluations)"
        ),
        validation_alias=_env("EVALUATION_MAX_RUNS"),
    )
    evaluation_max_concurrency: int = Field(
        10,
        ge=1,
        le=500,
        description=(
            "Most forks one evaluation runs at once: its request's concurrency defaults "
            "to it and may not exceed it. Every fork also takes a run-start permit "
            "(rate_limit_run_starts)"
        ),
        validation_alias=_env("EVALUATION_MAX_CONCURRENCY"),
    )
    evaluation_page_size: int = Field(
        50,
        ge=1,
        le=500,
        description=(
            "Source runs an evaluation's workflow takes per page: it continues as new "
            "after each page, so its history holds one page's events (about 25 per run)"
        ),
        validation_alias=_env("EVALUATION_PAGE_SIZE"),
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
    read_file_max_bytes: int = Field(
        65_536,
        ge=1024,
        le=1_048_576,
        description="Most bytes of a run file's text the built-in read_file tool gives an "
        "agent per call (the rest by its offset, docs/conversations.md#reading-run-files)",
        validation_alias=_env("READ_FILE_MAX_BYTES"),
    )
    shared_state_max_bytes: int = Field(
        SHARED_STATE_MAX_BYTES,
        ge=1024,
        le=1_048_576,
        description=(
            "Largest a run's shared state (state.<key>, all keys together, as JSON) and "
            "its context may grow by nodes' writes; a write past it fails the node with "
            "an error naming the key and the size (docs/graphs/index.md#shared-state)"
        ),
        validation_alias=_env("SHARED_STATE_MAX_BYTES"),
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


class ExpressionBudgetSettings(BaseModel):
    """What the expressions of one node execution, or one workflow task, may cost
    together (docs/graphs/index.md#expression-limits)."""

    expression_node_steps: int = Field(
        DEFAULT_NODE_STEPS,
        ge=MAX_EVALUATION_STEPS,
        le=100_000_000,
        description=(
            "Evaluation steps all the expressions and templates of one node execution "
            "may take together (a filter's where over every item, a map's item "
            "templates, a router's routes, params); past it the node fails "
            "(ExpressionBudgetSpent). Read by the worker"
        ),
        validation_alias=_env("EXPRESSION_NODE_STEPS"),
    )
    expression_workflow_task_steps: int = Field(
        DEFAULT_WORKFLOW_TASK_STEPS,
        ge=10_000,
        le=MAX_WORKFLOW_TASK_STEPS,
        description=(
            "Evaluation steps the expressions a run's workflow evaluates in one "
            "workflow task may take together (edge conditions; params of map, prompt "
            "and workstream nodes); past it the run fails naming the node, never "
            "Temporal's 2 s deadlock detector. The gateway passes it to each run it starts"
        ),
        validation_alias=_env("EXPRESSION_WORKFLOW_TASK_STEPS"),
    )
