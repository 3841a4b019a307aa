"""RFC 9457 problem bodies for every error a client can see.

One place maps the ``spindle.shared.contracts.errors`` tree, FastAPI's request validation errors,
malformed JSON, oversized bodies, and unavailable backing services (Temporal,
Redis, MongoDB) to ``application/problem+json`` responses that name the field
and the rule that failed. Routes raise ``SpindleError`` subclasses and never
build error responses themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute, iter_route_contexts
from pymongo.errors import ConnectionFailure
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from temporalio.service import RPCError

from spindle.gateway.http.temporal_errors import is_temporal_connect_error, temporal_error
from spindle.gateway.models import Problem
from spindle.shared.contracts.errors import (
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    SpindleError,
    Unavailable,
    ValidationFailed,
)

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"

_HTTP_METHODS = frozenset({"GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS"})
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
_DOCUMENTED = {
    400: "the body cannot be read: not JSON, not UTF-8, or nested too deeply (problem+json)",
    401: "missing or invalid credentials (problem+json)",
    403: "the credential may not do this, e.g. a stream token outside its run's reads "
    "(problem+json)",
    404: "unknown, or another tenant's (problem+json)",
    413: "the body is larger than the gateway accepts (problem+json)",
    415: "the body was not sent as application/json (problem+json)",
    422: "invalid parameters or body, naming each field and rule (problem+json)",
    429: "too many requests (or failed authentications); retry after Retry-After (problem+json)",
    503: "a backing service is unavailable; retry after Retry-After (problem+json)",
}
_HTTP_TITLES = {
    400: "Bad request",
    404: "Not found",
    405: "Method not allowed",
    406: "Not acceptable",
    413: "Content too large",
    415: "Unsupported media type",
}


class UnsupportedMediaType(SpindleError):
    """A route that reads JSON got a body of another (or no) content type."""

    status, jsonrpc_code, title = 415, -32600, "Unsupported media type"


class ProblemHTTPException(StarletteHTTPException):
    """Carries a ``SpindleError`` through code that only lets ``HTTPException`` pass.

    FastAPI turns any other exception raised while it reads a request body into
    a bare 400; the body checks of ``spindle.gateway.http.body_limit`` raise this instead, so
    the client gets the error's own status and problem body.
    """

    def __init__(self, error: SpindleError) -> None:
        super().__init__(error.status, error.detail)
        self.error = error


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
    retry_after = getattr(exc, "retry_after", None)
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    if exc.status == 401:
        headers = {"WWW-Authenticate": 'Bearer realm="spindle"'}
    return problem_response(
        exc.status,
        exc.title,
        exc.detail,
        instance=instance,
        errors=exc.errors or None,
        headers=headers,
    )


def validation_errors(exc: RequestValidationError, content_type: str | None = None) -> SpindleError:
    """Turn FastAPI's validation errors into one error naming every field.

    Malformed JSON is a 400 (the request cannot be read at all); a body that
    FastAPI left unparsed because it was not sent as JSON is a 415; everything
    else is a 422 naming where (``in``), which ``field`` and which ``rule``.
    """
    errors: list[dict[str, Any]] = []
    for err in exc.errors():
        loc = list(err.get("loc", ()))
        if loc == ["body"] and isinstance(exc.body, bytes | bytearray) and exc.body:
            # FastAPI hands a route the raw bytes when Content-Type is not JSON.
            sent = f"Content-Type '{content_type}'" if content_type else "no Content-Type"
            return UnsupportedMediaType(
                f"the request body was sent with {sent}; send it as application/json",
                errors=[{"in": "header", "field": "Content-Type", "rule": "media_type"}],
            )
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


def unreadable_body(exc: StarletteHTTPException) -> SpindleError | None:
    """Say why FastAPI could not read a body it answered with a bare 400.

    FastAPI reports every body it fails to decode other than a JSON syntax
    error as "There was an error parsing the body"; the cause says more.
    """
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return None
    if isinstance(cause, UnicodeDecodeError):
        return InvalidRequest(
            f"request body is not valid UTF-8: byte {cause.start} ({cause.reason})",
            errors=[{"in": "body", "field": "body", "rule": "utf8", "position": cause.start}],
        )
    if isinstance(cause, RecursionError):
        return InvalidRequest(
            "request body nests too deeply to be read",
            errors=[{"in": "body", "field": "body", "rule": "max_depth"}],
        )
    if isinstance(cause, ValueError):  # e.g. an integer of more than 4300 digits
        return InvalidRequest(
            f"request body cannot be read as JSON: {cause}",
            errors=[{"in": "body", "field": "body", "rule": "json_invalid"}],
        )
    return None


def document_problems(schema: dict[str, Any], authenticated: set[tuple[str, str]]) -> None:
    """Make an OpenAPI document say what the gateway really answers on errors.

    Every 4xx/5xx response without a body of its own (and FastAPI's default 422)
    becomes ``application/problem+json`` with the ``Problem`` schema, and every
    operation lists the errors any request of its shape can get: 400/413/415/422
    with a body, 422 with parameters, 404 with path parameters, 401/403/429/503 when
    it authenticates the caller (403: a stream token outside its scope; 429: the
    failed-authentication throttle).

    Args:
        schema: the document, changed in place.
        authenticated: ``(METHOD, path)`` of the operations that authenticate.
    """
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Problem"] = Problem.model_json_schema()
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            if method.upper() not in _HTTP_METHODS:
                continue
            responses = operation.setdefault("responses", {})
            expected: set[int] = set()
            if "requestBody" in operation:
                expected |= {400, 413, 415, 422}
            elif operation.get("parameters"):
                expected.add(422)
            if "{" in path:
                expected.add(404)
            if (method.upper(), path) in authenticated:
                expected |= {401, 403, 429, 503}
            for status in sorted(expected):
                responses.setdefault(str(status), {"description": _DOCUMENTED[status]})
            for status, response in responses.items():
                if status[:1] in ("4", "5") and _default_error_body(response):
                    response["content"] = {PROBLEM_JSON: {"schema": dict(_PROBLEM_REF)}}
    text = orjson.dumps(schema["paths"])
    for unused in ("HTTPValidationError", "ValidationError"):
        if f'"#/components/schemas/{unused}"'.encode() not in text:
            components.pop(unused, None)


def _default_error_body(response: dict[str, Any]) -> bool:
    content = response.get("content")
    if not content:
        return True
    schema = (content.get("application/json") or {}).get("schema") or {}
    return bool(schema.get("$ref") == "#/components/schemas/HTTPValidationError")


def _authenticated_operations(app: FastAPI, identity: Callable[..., Any]) -> set[tuple[str, str]]:
    def needs_identity(dependant: Dependant) -> bool:
        return dependant.call is identity or any(needs_identity(d) for d in dependant.dependencies)

    found: set[tuple[str, str]] = set()
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, APIRoute) and needs_identity(route.dependant):
            found.update((method, route.path_format or "") for method in route.methods or ())
    return found


def install_problem_docs(app: FastAPI, identity: Callable[..., Any]) -> None:
    """Serve the OpenAPI document with the problem responses of ``document_problems``.

    Args:
        app: the application.
        identity: the dependency that authenticates the caller; the operations
            that depend on it document 401 and 503.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document_problems(build(), _authenticated_operations(app, identity))
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]


async def _on_spindle_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SpindleError)
    if exc.status >= 500 and not isinstance(exc, Unavailable):
        log.error("request failed: %s", exc.detail)
    return spindle_problem(exc, request.url.path)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    error = validation_errors(exc, request.headers.get("content-type"))
    return spindle_problem(error, request.url.path)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc, ProblemHTTPException):
        return spindle_problem(exc.error, request.url.path)
    unreadable = unreadable_body(exc)
    if unreadable is not None:
        return spindle_problem(unreadable, request.url.path)
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


async def _on_temporal_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RPCError)
    error = temporal_error(exc)
    if not isinstance(error, Unavailable | NotFound):
        log.error("Temporal call failed on %s: %s", request.url.path, exc)
    return spindle_problem(error, request.url.path)


async def _on_redis_down(request: Request, exc: Exception) -> Response:
    log.warning("Redis unavailable on %s: %s", request.url.path, exc)
    return spindle_problem(Unavailable("the message bus (Redis) is unavailable"))


async def _on_mongo_down(request: Request, exc: Exception) -> Response:
    log.warning("MongoDB unavailable on %s: %s", request.url.path, exc)
    return spindle_problem(Unavailable("the run archive (MongoDB) is unavailable"))


async def _on_runtime_error(request: Request, exc: Exception) -> Response:
    if is_temporal_connect_error(exc):
        log.warning("Temporal unreachable on %s: %s", request.url.path, exc)
        return spindle_problem(Unavailable("Temporal is unavailable", retry_after=2))
    return await _on_unexpected(request, exc)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem_response(
        500, "Internal error", "an unexpected error occurred", instance=request.url.path
    )


def install_problem_handlers(app: FastAPI, identity: Callable[..., Any]) -> None:
    """Register the exception handlers that render every error as a problem, and
    document them in the OpenAPI schema (``identity``: see ``install_problem_docs``)."""
    install_problem_docs(app, identity)
    app.add_exception_handler(SpindleError, _on_spindle_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(RPCError, _on_temporal_error)
    app.add_exception_handler(RedisConnectionError, _on_redis_down)
    app.add_exception_handler(RedisTimeoutError, _on_redis_down)
    app.add_exception_handler(ConnectionFailure, _on_mongo_down)
    app.add_exception_handler(RuntimeError, _on_runtime_error)
    app.add_exception_handler(Exception, _on_unexpected)
