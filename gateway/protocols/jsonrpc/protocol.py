"""JSON-RPC 2.0 envelopes: parse a body into calls, build response objects.

Pure functions, no I/O. Where seed 003 and the JSON-RPC 2.0 specification
disagree (seed 003 calls ``id`` required; the specification makes a request
without ``id`` a notification that gets no reply), the specification wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from spindle.gateway.http.body_limit import json_body_problem
from spindle.shared.contracts.errors import SpindleError, ValidationFailed

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Seed 003's messages for its codes; other codes use the error's own title.
MESSAGES: dict[int, str] = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    -32001: "Task not found",
    -32002: "Circular dependency detected",
    -32003: "Executor not found",
    -32004: "Unauthorized",
}

RequestId = str | int | float | None


@dataclass(frozen=True)
class Call:
    """One valid request object.

    Attributes:
        method: the method name.
        params: named params (``{}`` when absent); None when given by position.
        id: the request id (None both for ``"id": null`` and notifications).
        is_notification: no ``id`` member: the caller wants no reply.
        payload: the request object as received.
    """

    method: str
    params: dict[str, Any] | None
    id: RequestId
    is_notification: bool
    payload: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Rejected:
    """A member that is not a valid request object: it gets ``error`` with ``id``."""

    response: dict[str, Any]


@dataclass(frozen=True)
class Parsed:
    """A body: one call (``batch`` false) or a batch of members.

    ``error`` is set when the body as a whole fails (parse error, empty batch,
    not an object or array); it is then the only response.
    """

    members: list[Call | Rejected]
    batch: bool
    error: dict[str, Any] | None = None


def error_response(
    request_id: RequestId, code: int, message: str | None = None, data: Any = None
) -> dict[str, Any]:
    """A JSON-RPC error response object."""
    error: dict[str, Any] = {"code": code, "message": message or MESSAGES.get(code, "Error")}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "error": error, "id": request_id}


def result_response(request_id: RequestId, result: Any) -> dict[str, Any]:
    """A JSON-RPC success response object."""
    return {"jsonrpc": "2.0", "result": result, "id": request_id}


def error_from_exception(request_id: RequestId, exc: SpindleError) -> dict[str, Any]:
    """The response for a ``SpindleError`` (seed 003 code, message and data)."""
    code = exc.jsonrpc_code
    data: dict[str, Any] = {}
    if isinstance(exc, ValidationFailed) and exc.errors:
        first = exc.errors[0]
        data["field"] = first.get("field", "params")
        data["reason"] = first.get("reason", exc.detail)
        if len(exc.errors) > 1:
            data["errors"] = exc.errors
    elif code == INVALID_PARAMS:
        data["field"] = "params"
        data["reason"] = exc.detail
    data.setdefault("detail", exc.detail)
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        data["retry_after"] = retry_after
    message = MESSAGES.get(code, exc.title)
    return error_response(request_id, code, message, data)


def _valid_id(value: Any) -> bool:
    # bool is an int in Python but not a JSON-RPC id.
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def parse_member(member: Any) -> Call | Rejected:
    """Check one request object against JSON-RPC 2.0."""
    if not isinstance(member, dict):
        return Rejected(
            error_response(None, INVALID_REQUEST, data={"reason": "a request must be an object"})
        )
    raw_id = member.get("id")
    echo_id = raw_id if _valid_id(raw_id) else None

    def rejected(reason: str) -> Rejected:
        return Rejected(error_response(echo_id, INVALID_REQUEST, data={"reason": reason}))

    if member.get("jsonrpc") != "2.0":
        return rejected('"jsonrpc" must be exactly "2.0"')
    method = member.get("method")
    if not isinstance(method, str) or not method:
        return rejected('"method" must be a non-empty string')
    if not _valid_id(raw_id):
        return rejected('"id" must be a string, a number or null')
    params = member.get("params", {})
    if params is None or not isinstance(params, dict | list):
        return rejected('"params" must be an object or an array')
    return Call(
        method=method,
        params=params if isinstance(params, dict) else None,
        id=raw_id,
        is_notification="id" not in member,
        payload=member,
    )


def parse_body(body: bytes) -> Parsed:
    """Parse an HTTP body into calls (see :class:`Parsed`)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return Parsed([], batch=False, error=error_response(None, PARSE_ERROR))
    # The body-shape check (depth, 64-bit integers, NUL keys) the REST routes get in
    # middleware; here its answer is a JSON-RPC error (-32600 or -32602), not a problem.
    problem = json_body_problem(body)
    if problem is not None:
        raw_id = document.get("id") if isinstance(document, dict) else None
        request_id = raw_id if _valid_id(raw_id) else None
        return Parsed(
            [], batch=isinstance(document, list), error=error_from_exception(request_id, problem)
        )
    if isinstance(document, list):
        if not document:
            return Parsed(
                [],
                batch=True,
                error=error_response(None, INVALID_REQUEST, data={"reason": "empty batch"}),
            )
        return Parsed([parse_member(member) for member in document], batch=True)
    if isinstance(document, dict):
        return Parsed([parse_member(document)], batch=False)
    return Parsed(
        [],
        batch=False,
        error=error_response(
            None, INVALID_REQUEST, data={"reason": "the body must be an object or an array"}
        ),
    )
