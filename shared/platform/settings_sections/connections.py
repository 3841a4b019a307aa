"""Settings of the services Spindle connects to: Temporal, Redis and MongoDB."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from spindle.shared.platform.settings_sections.env_names import spindle_env as _env


class TemporalSettings(BaseModel):
    """Where the Temporal frontend is and how to reach it; the task queue."""

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
    temporal_api_key: str | None = Field(
        None,
        description="API key sent to Temporal (Temporal Cloud); unset: none. Turns TLS on",
        validation_alias=_env("TEMPORAL_API_KEY", "TEMPORAL_API_KEY"),
    )
    temporal_tls: bool = Field(
        False,
        description="Connect to Temporal over TLS (on by itself when a TLS file or an API "
        "key is set)",
        validation_alias=_env("TEMPORAL_TLS", "TEMPORAL_TLS"),
    )
    temporal_tls_ca_file: str | None = Field(
        None,
        description="PEM file of the CA that signed Temporal's server certificate; unset: "
        "the system's roots",
        validation_alias=_env("TEMPORAL_TLS_CA_FILE", "TEMPORAL_TLS_SERVER_CA_CERT_FILE"),
    )
    temporal_tls_cert_file: str | None = Field(
        None,
        description="PEM client certificate for mutual TLS with Temporal",
        validation_alias=_env("TEMPORAL_TLS_CERT_FILE", "TEMPORAL_TLS_CLIENT_CERT_PATH"),
    )
    temporal_tls_key_file: str | None = Field(
        None,
        description="PEM private key of `temporal_tls_cert_file`",
        validation_alias=_env("TEMPORAL_TLS_KEY_FILE", "TEMPORAL_TLS_CLIENT_KEY_PATH"),
    )
    temporal_connect_attempts: int = Field(
        3,
        ge=1,
        description="Tries of the first connection to Temporal (with back-off) before a "
        "process gives up; gateways connect lazily and answer 503 meanwhile",
        validation_alias=_env("TEMPORAL_CONNECT_ATTEMPTS"),
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


class RedisSettings(BaseModel):
    """The Redis of the message bus and how long it keeps a run's messages."""

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


class MongoSettings(BaseModel):
    """The MongoDB archive: server, database, concerns, what is archived."""

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
    archive_retention_days: float = Field(
        90,
        ge=1,
        description="Days the archive keeps a run (its messages, node reports, trace): "
        "`spindle archive prune` without `--older-than-days` deletes older ones. A stream "
        "resumes from any cursor (SSE, A2A, AG-UI, MCP) for this long; an older cursor "
        "gets an explicit CURSOR_EXPIRED answer",
        validation_alias=_env("ARCHIVE_RETENTION_DAYS"),
    )
    archive_port_data_max_bytes: int = Field(
        16_384,
        ge=0,
        description="Largest node output (JSON bytes) kept in a run document's portData; "
        "a larger one is kept as a summary (its node report has it whole)",
        validation_alias=_env("ARCHIVE_PORT_DATA_MAX_BYTES"),
    )
    call_records_max_per_run: int = Field(
        10_000,
        ge=0,
        description="Tool calls and LLM turns a run records for recorded replay "
        "(docs/replay-and-compare.md#recorded-replay); later ones are not recorded, and a "
        "fork replaying them misses. 0: record nothing",
        validation_alias=_env("CALL_RECORDS_MAX_PER_RUN"),
    )
    call_record_max_result_bytes: int = Field(
        262_144,
        ge=0,
        description="Largest result (JSON bytes) of one recorded tool call or LLM turn; a "
        "larger one is not recorded, and a fork replaying it misses",
        validation_alias=_env("CALL_RECORD_MAX_RESULT_BYTES"),
    )
    archive_catch_up_seconds: float = Field(
        30.0,
        ge=0,
        description="Seconds a recorded fork's lookup that missed, and an evaluation's "
        "compare of a run that has just ended, wait for the archiver to write what is "
        "queued before them (a worker lost mid-write holds the queue for up to 15 s); "
        "past it the miss follows `on_miss` and the compare is retried "
        "(docs/replay-and-compare.md#limits)",
        validation_alias=_env("ARCHIVE_CATCH_UP_SECONDS"),
    )
