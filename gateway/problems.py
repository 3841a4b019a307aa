"""RFC 9457 problem bodies for every error a client can see.

One place maps the ``shared.errors`` tree, FastAPI's request validation errors,
malformed JSON, oversized bodies, and unavailable backing services (Temporal,
Redis, MongoDB) to ``application/problem+json`` responses that name the field
and the rule that failed. Routes raise ``SpindleError`` subclasses and never
build error responses themselves.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pymongo.errors import ConnectionFailure
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from temporalio.service import RPCError, RPCStatusCode

from shared.errors import InvalidRequest, NotFound, SpindleError, Unavailable, ValidationFailed

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"

# Temporal answers these when it cannot serve the call right now (server down,
# overloaded, or the call timed out): the client should retry, not give up.
_TEMPORAL_RETRYABLE = frozenset(
    {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.RESOURCE_EXHAUSTED}
)
_HTTP_TITLES = {
    400: "Bad request",
    404: "Not found",
    405: "Method not allowed",
    406: "Not acceptable",
    413: "Content too large",
    415: "Unsupported media type",
}


class PayloadTooLarge(SpindleError):
    """The request body is larger than ``settings.max_body_bytes``."""

    status, jsonrpc_code, title = 413, -32600, "Content too large"


def problem_response(
    status: int,
    title: str,
    detail: str,
    *,
    instance: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """An ``application/problem+json`` response."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    if errors:
        body["errors"] = errors
    return Response(
        orjson.dumps(body, default=str),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


def spindle_problem(exc: SpindleError, instance: str | None = None) -> Response:
    """The problem response for one ``SpindleError`` (its ``problem()`` body plus
    ``instance``; ``Retry-After`` for ``Unavailable``)."""
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Unavailable) else None
    return problem_response(
        exc.status,
        exc.title,
        exc.detail,
        instance=instance,
        errors=exc.errors or None,
        headers=headers,
    )


def temporal_error(exc: RPCError, *, what: str = "Temporal") -> SpindleError:
    """Translate a Temporal RPC failure into the client-facing error."""
    if exc.status in _TEMPORAL_RETRYABLE:
        return Unavailable(f"{what} is unavailable: {exc.message}", retry_after=2)
    if exc.status == RPCStatusCode.NOT_FOUND:
        return NotFound(exc.message)
    return SpindleError(f"{what} call failed: {exc.message}")


def is_temporal_connect_error(exc: BaseException) -> bool:
    """The lazy Temporal client raises a bare RuntimeError until it first connects."""
    return isinstance(exc, RuntimeError) and str(exc).startswith("Failed client connect")


def validation_errors(exc: RequestValidationError) -> SpindleError:
    """Turn FastAPI's validation errors into one error naming every field.

    Malformed JSON is a 400 (the request cannot be read at all); everything
    else is a 422 naming where (``in``), which ``field`` and which ``rule``.
    """
    errors: list[dict[str, Any]] = []
    for err in exc.errors():
        loc = list(err.get("loc", ()))
        if err.get("type") == "json_invalid":
            position = loc[1] if len(loc) > 1 else None
            reason = (err.get("ctx") or {}).get("error", "JSON decode error")
            where = f" at position {position}" if position is not None else ""
            return InvalidRequest(
                f"request body is not valid JSON: {reason}{where}",
                errors=[{"field": "body", "rule": "json_invalid", "message": reason}],
            )
        source = str(loc[0]) if loc else "body"
        field = ".".join(str(p) for p in loc[1:]) or source
        errors.append(
            {
                "in": source,
                "field": field,
                "rule": err.get("type", "invalid"),
                "message": f"{field}: {err.get('msg', 'invalid')}",
            }
        )
    if not errors:
        return ValidationFailed("request is invalid")
    detail = "; ".join(e["message"] for e in errors)
    return ValidationFailed(detail, errors=errors)


def install_problem_handlers(app: FastAPI) -> None:
    """Register the exception handlers that render every error as a problem."""

    async def on_spindle_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SpindleError)
        if exc.status >= 500 and not isinstance(exc, Unavailable):
            log.error("request failed: %s", exc.detail)
        return spindle_problem(exc, request.url.path)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return spindle_problem(validation_errors(exc), request.url.path)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 413:
            detail = exc.detail if isinstance(exc.detail, str) else "request body is too large"
            return spindle_problem(PayloadTooLarge(detail), request.url.path)
        title = _HTTP_TITLES.get(exc.status_code, "Error")
        detail = exc.detail if isinstance(exc.detail, str) else title
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route for {request.method} {request.url.path}"
        return problem_response(
            exc.status_code,
            title,
            detail,
            instance=request.url.path,
            headers=dict(exc.headers) if exc.headers else None,
        )

    async def on_temporal_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RPCError)
        error = temporal_error(exc)
        if not isinstance(error, Unavailable | NotFound):
            log.error("Temporal call failed on %s: %s", request.url.path, exc)
        return spindle_problem(error, request.url.path)

    async def on_redis_down(request: Request, exc: Exception) -> Response:
        log.warning("Redis unavailable on %s: %s", request.url.path, exc)
        return spindle_problem(Unavailable("the message bus (Redis) is unavailable"))

    async def on_mongo_down(request: Request, exc: Exception) -> Response:
        log.warning("MongoDB unavailable on %s: %s", request.url.path, exc)
        return spindle_problem(Unavailable("the run archive (MongoDB) is unavailable"))

    async def on_runtime_error(request: Request, exc: Exception) -> Response:
        if is_temporal_connect_error(exc):
            log.warning("Temporal unreachable on %s: %s", request.url.path, exc)
            return spindle_problem(Unavailable("Temporal is unavailable", retry_after=2))
        return await on_unexpected(request, exc)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(
            500, "Internal error", "an unexpected error occurred", instance=request.url.path
        )

    app.add_exception_handler(SpindleError, on_spindle_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RPCError, on_temporal_error)
    app.add_exception_handler(RedisConnectionError, on_redis_down)
    app.add_exception_handler(RedisTimeoutError, on_redis_down)
    app.add_exception_handler(ConnectionFailure, on_mongo_down)
    app.add_exception_handler(RuntimeError, on_runtime_error)
    app.add_exception_handler(Exception, on_unexpected)
