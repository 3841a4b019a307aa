"""Errors the client SDK raises.

Every error is a ``ClientError``, itself a ``spindle.shared.contracts.errors.SpindleError``, so a
program (and the ``spindle`` command) handles the SDK's errors like any other
Spindle error. An HTTP error answer becomes the ``ApiError`` subclass of its
status, carrying the RFC 9457 problem body the gateway sent::

    ClientError
    ├── ApiError                     any 4xx/5xx answer (status, detail, errors)
    │   ├── BadRequestError          400
    │   ├── UnauthorizedError        401
    │   ├── ForbiddenError           403
    │   ├── NotFoundError            404 (also another tenant's run)
    │   ├── ConflictError            409
    │   ├── PayloadTooLargeError     413
    │   ├── ValidationError          422 (``errors`` names each field and rule)
    │   ├── RateLimitedError         429 (``retry_after`` seconds)
    │   └── UnavailableError         502, 503, 504 (``retry_after`` seconds)
    ├── ConnectionFailed             the gateway could not be reached
    └── StreamDisconnected           the stream broke and every reconnection failed
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from spindle.shared.contracts.errors import SpindleError


class ClientError(SpindleError):
    """Base of the SDK's errors."""

    title = "Client error"


class ApiError(ClientError):
    """The gateway answered with an error status.

    Attributes:
        status: the HTTP status.
        detail: what is wrong, as the gateway said it.
        errors: one entry per problem (``field``, ``rule``, ``message``) when given.
        problem: the whole problem body (empty when the answer was not JSON).
        retry_after: seconds the gateway asked to wait (``Retry-After``), if any.
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int,
        errors: list[dict[str, Any]] | None = None,
        problem: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(detail, errors=errors)
        self.status = status
        self.problem_body = problem or {}
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.status}: {self.detail}"


class BadRequestError(ApiError):
    title = "Bad request"


class UnauthorizedError(ApiError):
    title = "Unauthorized"


class ForbiddenError(ApiError):
    title = "Forbidden"


class NotFoundError(ApiError):
    title = "Not found"


class ConflictError(ApiError):
    title = "Conflict"


class PayloadTooLargeError(ApiError):
    title = "Payload too large"


class ValidationError(ApiError):
    title = "Validation failed"


class RateLimitedError(ApiError):
    title = "Too many requests"


class UnavailableError(ApiError):
    title = "Service unavailable"


class ConnectionFailed(ClientError):
    """The gateway could not be reached (refused, reset, timed out)."""

    title = "Connection failed"


class StreamDisconnected(ClientError):
    """A message stream broke and every reconnection attempt failed.

    Attributes:
        attempts: reconnection attempts made.
    """

    title = "Stream disconnected"

    def __init__(self, detail: str, *, attempts: int) -> None:
        super().__init__(detail)
        self.attempts = attempts


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitedError,
    502: UnavailableError,
    503: UnavailableError,
    504: UnavailableError,
}

# Answers a client may retry as they are: the server, not the request, was the problem.
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


def retry_after_of(headers: httpx.Headers) -> float | None:
    """``Retry-After`` in seconds (the delta-seconds form), or None."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def api_error(status: int, body: bytes, headers: httpx.Headers) -> ApiError:
    """The ``ApiError`` for an error answer, reading its problem body if it has one."""
    problem: dict[str, Any] = {}
    try:
        parsed = orjson.loads(body) if body else None
        if isinstance(parsed, dict):
            problem = parsed
    except ValueError:
        pass
    detail = problem.get("detail") or problem.get("title")
    if not isinstance(detail, str) or not detail:
        text = body.decode("utf-8", errors="replace").strip()
        detail = text[:500] or httpx.codes.get_reason_phrase(status) or f"HTTP {status}"
    errors = problem.get("errors")
    kind = _BY_STATUS.get(status, ApiError)
    return kind(
        detail,
        status=status,
        errors=[e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else None,
        problem=problem,
        retry_after=retry_after_of(headers),
    )


def raise_for_status(response: httpx.Response) -> None:
    """Raise the ``ApiError`` of an error answer (its body must have been read)."""
    if response.status_code >= 400:
        raise api_error(response.status_code, response.content, response.headers)
