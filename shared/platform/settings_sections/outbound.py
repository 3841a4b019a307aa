"""Settings of calls to caller-chosen places: MCP servers and push notifications."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from spindle.shared.platform.settings_sections.env_names import spindle_env as _env


class OutboundSettings(BaseModel):
    """Which addresses outbound URLs may reach besides the public ones."""

    outbound_allow: str = Field(
        "",
        description=(
            "Comma-separated host names and CIDRs that outbound URLs may reach although "
            "the policy refuses them by default (loopback, private, link-local, metadata "
            "addresses); e.g. `127.0.0.0/8,::1/128` (what `spindle dev` sets)"
        ),
        validation_alias=_env("OUTBOUND_ALLOW"),
    )

    @field_validator("outbound_allow")
    @classmethod
    def _outbound_allow_parses(cls, value: str) -> str:
        # Refused at startup, not at the first push.
        from spindle.shared.platform.outbound import OutboundPolicy

        OutboundPolicy.parse(value)
        return value


class McpSettings(BaseModel):
    """Which MCP servers agent nodes may use, and how long they wait for them."""

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
    mcp_list_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description=(
            "Longest wait of GET /tools?graph= for one MCP server of the graph (connecting "
            "and listing its tools); a server that takes longer is reported as unreachable"
        ),
        validation_alias=_env("MCP_LIST_TIMEOUT_SECONDS"),
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


class PushSettings(BaseModel):
    """Push notification POSTs: timeout, concurrency and breakers."""

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
