"""Keep stream tokens out of the access log.

Browsers' EventSource cannot send headers, so the SSE route takes its token in
the ``access_token`` query parameter (docs/design.md §6). Uvicorn's access log prints
the full path with its query string; this filter masks the token's value.
"""

from __future__ import annotations

import logging
import re

_SECRET_PARAMS = re.compile(r"((?:^|[?&])(?:access_token|token|api_key)=)[^&\s\"]*", re.IGNORECASE)


def redact_query(text: str) -> str:
    """Replace the value of secret query parameters with ``***``."""
    return _SECRET_PARAMS.sub(r"\1***", text)


class RedactTokens(logging.Filter):
    """Masks secret query parameters in uvicorn access-log records."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_query(arg) if isinstance(arg, str) and "=" in arg else arg
                for arg in record.args
            )
        elif isinstance(record.msg, str) and "=" in record.msg:
            record.msg = redact_query(record.msg)
        return True


def install_access_log_redaction() -> None:
    """Attach the filter to uvicorn's access logger (idempotent)."""
    logger = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactTokens) for f in logger.filters):
        logger.addFilter(RedactTokens())
