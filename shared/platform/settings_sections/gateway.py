"""Settings of the gateway: where it listens, its streams, and who may call it."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator

from spindle.shared.platform.settings_sections.env_names import spindle_env as _env

JwtAlgorithm = Literal["HS256", "RS256"]
JWT_ALGORITHMS: tuple[JwtAlgorithm, ...] = ("HS256", "RS256")

# The port a browser leaves out of an Origin header, per scheme.
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_ORIGIN_FORM = (
    "write scheme://host[:port] with scheme http or https, e.g. 'https://app.example.com'"
)


def cors_origin(value: str) -> str:
    """One entry of ``cors_allow_origins``, spelt as a browser's ``Origin`` header spells it.

    The scheme and host are lower-cased and a default port (80 for http, 443 for https)
    is dropped: the browser sends ``https://app.example.com``, never
    ``HTTPS://App.Example.com:443``, and the CORS check compares exact strings.

    Raises:
        ValueError: ``*``, or not an origin (another scheme, a path, a query, user info,
            a bad host or port); the message names the setting.
    """
    text = value.strip()
    if text == "*":
        raise ValueError(
            "cors_allow_origins: '*' is refused; list each origin whose pages may call the "
            "gateway. With '*' any web page a user opens could read what the gateway "
            "answers that user's browser (a gateway reachable only inside a network, or "
            "one with SPINDLE_AUTH_DISABLED)"
        )
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:  # a port that is not a number or out of range
        raise ValueError(f"cors_allow_origins: {value!r} is not an origin: {exc}") from exc
    scheme, host = parts.scheme.lower(), parts.hostname or ""
    if scheme not in _DEFAULT_PORTS or not host or not text.lower().startswith(f"{scheme}://"):
        raise ValueError(f"cors_allow_origins: {value!r} is not an origin: {_ORIGIN_FORM}")
    if parts.path or parts.query or parts.fragment or text.endswith(("?", "#")):
        raise ValueError(
            f"cors_allow_origins: {value!r} has a path, query or fragment; an origin is "
            f"only scheme://host[:port] (what a browser sends as Origin): {_ORIGIN_FORM}"
        )
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"cors_allow_origins: {value!r} has user info: {_ORIGIN_FORM}")
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError as exc:
            raise ValueError(f"cors_allow_origins: {value!r} has a bad IPv6 host") from exc
        host = f"[{host}]"
    elif not _HOST_NAME.fullmatch(host):
        hint = "; write an international name in its xn-- (punycode) form" * (not host.isascii())
        raise ValueError(f"cors_allow_origins: {value!r} has a bad host name{hint}")
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}:{port}"
    return f"{scheme}://{host}"


class GatewaySettings(BaseModel):
    """Where the gateway listens, its SSE streams and its shutdown."""

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
    a2a_default_graph: str = Field(
        "research-agent",
        min_length=1,
        description=(
            "The graph an A2A message runs when neither its metadata nor the send's names "
            "one ('graph'); a2a-tck plays the A2A TCK's scenarios for a stock TCK run "
            "(docs/protocols/a2a.md)"
        ),
        validation_alias=_env("A2A_DEFAULT_GRAPH"),
    )
    a2a_card_default_version: Literal["1.0", "0.3"] = Field(
        "1.0",
        description=(
            "The shape of the A2A agent card at /.well-known/agent-card.json when the request "
            "names no A2A-Version: 1.0 (A2A 1.0 section 14.3) or 0.3 (for A2A 0.3 clients, "
            "which send no version and need the card's url)"
        ),
        validation_alias=_env("A2A_CARD_DEFAULT_VERSION"),
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
            "timeouts) and update the history gauges, then over runs with open prompts: "
            "a closed run's prompts leave the inbox within one interval; 0: no sweep"
        ),
        validation_alias=_env("CLOSED_RUN_SWEEP_SECONDS"),
    )
    closed_run_sweep_batch: int = Field(
        200,
        ge=1,
        le=10_000,
        description=(
            "Most non-terminal run documents one sweep looks at (least recently updated "
            "first), and most runs with open prompts (the next sweep goes on from there)"
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
    compare_max_diff_entries: int = Field(
        200,
        ge=1,
        le=10_000,
        description=(
            "Most entries of the output diff GET /runs/{a}/compare/{b} answers (and the "
            "evaluations' compares); past it the diff says truncated "
            "(docs/replay-and-compare.md)"
        ),
        validation_alias=_env("COMPARE_MAX_DIFF_ENTRIES"),
    )
    cors_allow_origins: list[str] = Field(
        default_factory=list,
        description=(
            "Origins (scheme://host[:port], e.g. `https://app.example.com`) whose web pages "
            "may call the gateway from the browser, e.g. to embed `<spindle-conversation>` "
            "(CORS, without cookies; docs/streaming/embedding.md); JSON list. Empty: no CORS "
            "headers, only pages of the gateway's own origin. `*` is refused"
        ),
        validation_alias=_env("CORS_ALLOW_ORIGINS"),
    )

    @field_validator("cors_allow_origins")
    @classmethod
    def _cors_allow_origins_are_origins(cls, value: list[str]) -> list[str]:
        # Refused at start-up: a misspelt origin would otherwise fail in the browser only.
        return list(dict.fromkeys(cors_origin(entry) for entry in value))

    @property
    def base_url(self) -> str:
        """The gateway's address as clients should use it (never 0.0.0.0)."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.gateway_host in ("0.0.0.0", "::") else self.gateway_host
        return f"http://{host}:{self.gateway_port}"


class AuthSettings(BaseModel):
    """Authentication of callers (API keys, JWTs, stream tokens) and their roles."""

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
    key_admin_roles: list[str] = Field(
        default_factory=lambda: ["admin"],
        description=(
            "Roles that may create, list and revoke the API keys of their tenant "
            "(`/keys`, `spindle keys`); JSON list. Other tenants' keys stay out of reach"
        ),
        validation_alias=_env("KEY_ADMIN_ROLES"),
    )
    schedule_admin_roles: list[str] = Field(
        default_factory=lambda: ["admin", "schedule-admin"],
        description=(
            "Roles that may replace, pause, unpause, delete, trigger or backfill any schedule "
            "of their tenant (its owner, who created it, always may); JSON list"
        ),
        validation_alias=_env("SCHEDULE_ADMIN_ROLES"),
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
