"""Process logging: JSON lines for machines, readable lines for a terminal.

``configure_logging(settings)`` replaces the root handlers once per process
(worker, gateway, CLI). Each record carries ``ts``, ``level``, ``logger``,
``message``, the ``traceId`` / ``spanId`` of the current OpenTelemetry span
when there is one (JSON only) and, when known, the ``runId`` / ``nodeId`` /
``nodeType`` (and the activity's ``attempt``) of the node being executed: activities call
:func:`bind_log_context` on entry and
the values live in a ``contextvars`` context, so concurrent activities of one
worker never see each other's ids.

A record may carry an optional ``fields`` extra (a dict merged into its JSON
object, e.g. the ``event`` of a node's start/finish line,
``spindle.worker.telemetry.node_logs``) and an optional ``payload`` extra
(``log.info("…", extra={"payload": value})``): it is logged with keys that
look like secrets masked and its JSON bounded to ``settings.log_payload_max_chars``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal, TextIO
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import trace

from spindle.shared.platform.settings import Settings

LogFormat = Literal["auto", "json", "text"]

# Key fragments whose values never reach a log line (matched case-insensitively
# as substrings, so ``X-Api-Key`` and ``refresh_token`` are masked too).
SECRET_KEY_PATTERNS = ("token", "secret", "password", "api_key", "apikey", "authorization")
MASK = "***"

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "spindle_log_context", default=None
)

# LogRecord attributes that are not user extras.
_RECORD_FIELDS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


def bind_log_context(
    *,
    run_id: str | None = None,
    node_id: str | None = None,
    node_type: str | None = None,
    attempt: int | None = None,
) -> None:
    """Set the ids of the current task's log lines (None leaves a field unset)."""
    values: dict[str, Any] = {
        key: value
        for key, value in (("runId", run_id), ("nodeId", node_id), ("nodeType", node_type))
        if value
    }
    if attempt is not None:
        values["attempt"] = attempt
    _context.set(values)


def bind_activity_log_context(*, node_id: str | None = None, node_type: str | None = None) -> None:
    """``bind_log_context`` with the run id of the running Temporal activity."""
    from temporalio import activity

    run_id: str | None = None
    attempt: int | None = None
    try:
        info = activity.info()
        run_id, attempt = info.workflow_id, info.attempt
    except RuntimeError:  # not inside an activity (direct calls in tests)
        run_id = None
    bind_log_context(run_id=run_id, node_id=node_id, node_type=node_type, attempt=attempt)


def log_context() -> dict[str, Any]:
    """The ids bound in the current context."""
    return dict(_context.get() or {})


def redact(value: Any, extra_keys: Iterable[str] = ()) -> Any:
    """``value`` with the values of secret-looking keys replaced by ``***``."""
    patterns = tuple(SECRET_KEY_PATTERNS) + tuple(k.lower() for k in extra_keys)
    return _redact(value, patterns)


def _redact(value: Any, patterns: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {
            key: MASK
            if any(p in str(key).lower().replace("-", "_") for p in patterns)
            else _redact(item, patterns)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact(item, patterns) for item in value]
    return value


def payload_snapshot(value: Any, *, redact_keys: Iterable[str] = (), limit: int) -> str:
    """The redacted JSON of ``value``, cut to ``limit`` characters (marked ``…``)."""
    text = json.dumps(redact(value, redact_keys), default=str, ensure_ascii=False)
    if len(text) > limit:
        return text[:limit] + "…"
    return text


def _trace_ids() -> dict[str, str]:
    """``traceId`` / ``spanId`` of the current OpenTelemetry span, if there is one."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {
        "traceId": trace.format_trace_id(context.trace_id),
        "spanId": trace.format_span_id(context.span_id),
    }


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def __init__(self, *, redact_keys: Iterable[str] = (), payload_limit: int) -> None:
        super().__init__()
        self.redact_keys = tuple(redact_keys)
        self.payload_limit = payload_limit

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_context.get() or {})
        entry.update(_trace_ids())
        fields = record.__dict__.get("fields")
        if isinstance(fields, dict):
            entry.update({k: v for k, v in fields.items() if k not in entry})
        if "payload" in record.__dict__:
            entry["payload"] = payload_snapshot(
                record.__dict__["payload"],
                redact_keys=self.redact_keys,
                limit=self.payload_limit,
            )
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time level logger [run node]: message`` for people at a terminal."""

    def __init__(self, *, redact_keys: Iterable[str] = (), payload_limit: int) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(ids)s: %(message)s")
        self.redact_keys = tuple(redact_keys)
        self.payload_limit = payload_limit

    def format(self, record: logging.LogRecord) -> str:
        ids = _context.get() or {}
        record.ids = f" [{' '.join(str(v) for v in ids.values())}]" if ids else ""
        line = super().format(record)
        if "payload" in record.__dict__:
            snapshot = payload_snapshot(
                record.__dict__["payload"], redact_keys=self.redact_keys, limit=self.payload_limit
            )
            line += f" payload={snapshot}"
        return line


def use_json(log_format: LogFormat, stream: TextIO) -> bool:
    """JSON unless asked for text, or ``auto`` and the stream is a terminal."""
    if log_format == "auto":
        return not stream.isatty()
    return log_format == "json"


def build_handler(settings: Settings, stream: TextIO | None = None) -> logging.Handler:
    """A stream handler with the formatter ``settings.log_format`` asks for."""
    target = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(target)
    formatter_type = JsonFormatter if use_json(settings.log_format, target) else TextFormatter
    handler.setFormatter(
        formatter_type(
            redact_keys=settings.log_redact_keys, payload_limit=settings.log_payload_max_chars
        )
    )
    return handler


def configure_logging(settings: Settings, stream: TextIO | None = None) -> None:
    """Route the root logger through one handler configured by ``settings``."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(build_handler(settings, stream))
    root.setLevel(settings.log_level.upper())
    # httpx logs every request's full URL at INFO, and push URLs are chosen by
    # callers (a token in the query string); our own lines use loggable_url.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, root.level))


def redact_url(url: str) -> str:
    """A URL without its password, for logs (also with several hosts, as in
    ``redis+cluster://`` or a MongoDB replica set)."""
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    username = userinfo.split(":", 1)[0]
    netloc = f"{username}:***@{hosts}" if username else f"***@{hosts}"
    return urlunsplit(parts._replace(netloc=netloc))
