"""Settings of the worker process and of every process's logs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from spindle.shared.platform.settings_sections.env_names import spindle_env as _env


class WorkerSettings(BaseModel):
    """The worker process: event loop, concurrency, queues, metrics, shutdown."""

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


class LoggingSettings(BaseModel):
    """Log level, format and what logged payloads show."""

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
