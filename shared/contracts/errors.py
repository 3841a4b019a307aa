"""The Spindle exception tree, documented in one place.

Every error a client can cause or see is a ``SpindleError`` subclass that carries
its HTTP status (for REST problem bodies, RFC 9457) and its JSON-RPC code (seed
003 numbering for ``tasks.*``). The gateway maps them; nothing else needs to.

::

    SpindleError                     500  -32603  internal error
    ├── InvalidRequest               400  -32600  malformed request body
    ├── ValidationFailed             422  -32602  well-formed but invalid (names field + rule)
    │   ├── GraphInvalid             422  -32602  graph spec breaks a rule (names node + rule)
    │   ├── InputInvalid             422  -32602  input/HITL answer fails its JSON Schema
    │   └── ExecutorNotFound         422  -32003  unknown node type / executor
    ├── CircularDependency           422  -32002  a dependency cycle
    ├── NotFound                     404  -32001  unknown (or not visible) run, graph, task
    ├── Conflict                     409  -32000  the target's state forbids the operation
    ├── Unauthorized                 401  -32004  missing or bad credentials
    │   └── Forbidden                403  -32004  known caller, not allowed this action on a
    │                                              run it can see (other tenants' runs: NotFound)
    ├── PayloadTooLarge              413  -32600  body, upload or field over its limit
    ├── RateLimited                  429  -32005  tenant over its rate or stream limit; retry
    └── Unavailable                  503  -32000  a backing service is down; retry later
"""

from __future__ import annotations

from typing import Any


class SpindleError(Exception):
    """Base of all errors Spindle reports to clients."""

    status: int = 500
    jsonrpc_code: int = -32603
    title: str = "Internal error"

    def __init__(self, detail: str, *, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or []

    def problem(self) -> dict[str, Any]:
        """An RFC 9457 problem body."""
        body: dict[str, Any] = {
            "type": "about:blank",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if self.errors:
            body["errors"] = self.errors
        return body


class InvalidRequest(SpindleError):
    status, jsonrpc_code, title = 400, -32600, "Invalid request"


class ValidationFailed(SpindleError):
    status, jsonrpc_code, title = 422, -32602, "Validation failed"


class GraphInvalid(ValidationFailed):
    title = "Invalid graph"


class InputInvalid(ValidationFailed):
    title = "Invalid input"


class ExecutorNotFound(ValidationFailed):
    jsonrpc_code, title = -32003, "Executor not found"


class CircularDependency(SpindleError):
    status, jsonrpc_code, title = 422, -32002, "Circular dependency detected"


class NotFound(SpindleError):
    status, jsonrpc_code, title = 404, -32001, "Not found"


class Conflict(SpindleError):
    status, jsonrpc_code, title = 409, -32000, "Conflict"


class Unauthorized(SpindleError):
    status, jsonrpc_code, title = 401, -32004, "Unauthorized"


class Forbidden(Unauthorized):
    status, title = 403, "Forbidden"


class PayloadTooLarge(SpindleError):
    status, jsonrpc_code, title = 413, -32600, "Payload too large"


class RateLimited(SpindleError):
    status, jsonrpc_code, title = 429, -32005, "Too many requests"

    def __init__(self, detail: str, *, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.retry_after = max(1, retry_after)


class Unavailable(SpindleError):
    status, jsonrpc_code, title = 503, -32000, "Service unavailable"

    def __init__(self, detail: str, *, retry_after: int = 5) -> None:
        super().__init__(detail)
        self.retry_after = retry_after
