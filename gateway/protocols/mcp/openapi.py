"""``/mcp`` in the OpenAPI document.

``/mcp`` is a plain ASGI route (the MCP SDK's streamable-HTTP transport renders
its own answers), so FastAPI does not describe it. This module adds what a
client or a contract tester needs: the three methods, the session and
protocol-version headers, and every status the route answers with. Errors of
the transport are JSON-RPC error objects (``id`` null); errors of Spindle's own
doors (credentials, limits, media type) are problem+json as on every route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

PATH = "/mcp"
PROBLEM = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}

_JSONRPC_ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["jsonrpc", "error"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer", "null"]},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "integer"},
                "message": {"type": "string"},
                "data": {},
            },
        },
    },
}
_TRANSPORT_ERROR = {"application/json": {"schema": _JSONRPC_ERROR}}
_SSE = {
    "text/event-stream": {
        "schema": {
            "type": "object",
            "properties": {
                "event": {"type": "string", "description": "`message`"},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "description": "one JSON-RPC message",
                },
                "id": {"type": "string", "description": "the event's id, for resumption"},
                "retry": {"type": "integer", "description": "reconnection delay, ms"},
            },
        }
    }
}
# A request, a notification or a response (to an elicitation): JSON-RPC 2.0 (MCP §basic).
_MESSAGE: dict[str, Any] = {
    "type": "object",
    "required": ["jsonrpc"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer"]},
        "method": {"type": "string", "minLength": 1},
        "params": {"type": "object"},
        "result": {"type": "object"},
        "error": _JSONRPC_ERROR["properties"]["error"],
    },
    "anyOf": [{"required": ["method"]}, {"required": ["id", "result"]}, {"required": ["error"]}],
    "example": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "example", "version": "1.0"},
        },
    },
}
_SESSION = {
    "name": "Mcp-Session-Id",
    "in": "header",
    "required": False,
    "description": "the session the `initialize` answer named (every request after it)",
    "schema": {"type": "string"},
}
_VERSION = {
    "name": "MCP-Protocol-Version",
    "in": "header",
    "required": False,
    "description": "the MCP protocol version the session negotiated",
    "schema": {"type": "string"},
}
_SECURITY: list[dict[str, list[str]]] = [{"HTTPBearer": []}, {"APIKeyHeader": []}]


def _doors(*extra: int) -> dict[str, Any]:
    """The statuses of Spindle's own checks before the transport sees the request."""
    described = {
        401: "missing or invalid credentials (problem+json)",
        403: "a stream token: it reads one run's stream only (problem+json)",
        413: "the body is larger than the gateway accepts (problem+json)",
        415: "the body was not sent as application/json (problem+json)",
        422: "a JSON body the gateway refuses before MCP reads it, e.g. a NUL in an object "
        "key (problem+json)",
        429: "over the tenant's stream or request limits; retry after Retry-After (problem+json)",
        503: "a backing service is unavailable; retry after Retry-After (problem+json)",
    }
    wanted = {401, 403, 429, 503, *extra}
    return {str(s): {"description": described[s], "content": PROBLEM} for s in sorted(wanted)}


def _transport(status: int, description: str) -> dict[str, Any]:
    return {str(status): {"description": description, "content": _TRANSPORT_ERROR}}


def _stateless(method: str) -> dict[str, Any]:
    return {
        "405": {
            "description": f"an MCP-Protocol-Version without sessions (2026-07-28): no {method} "
            "(no body)"
        }
    }


def path_item() -> dict[str, Any]:
    """The OpenAPI path item of ``/mcp``."""
    missing = "no Mcp-Session-Id on a request other than `initialize`, or an invalid message"
    return {
        "post": {
            "tags": ["mcp"],
            "summary": "MCP (streamable HTTP): send one JSON-RPC message",
            "description": (
                "Tools are the caller's tenant's graphs (docs/protocols/mcp.md). The client "
                "must accept both application/json and text/event-stream."
            ),
            "operationId": "mcp_post",
            "security": _SECURITY,
            "parameters": [_SESSION, _VERSION],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _MESSAGE}},
            },
            "responses": {
                "200": {
                    "description": "the answer to a request, as JSON or as an SSE stream "
                    "(progress and elicitations before the result)",
                    "content": {
                        "application/json": {"schema": {"type": "object"}},
                        **_SSE,
                    },
                },
                "202": {"description": "a notification or response accepted (no body)"},
                **_transport(400, f"{missing}: a JSON-RPC error"),
                **_transport(404, "unknown or ended session: a JSON-RPC error"),
                **_transport(406, "Accept lacks application/json or text/event-stream"),
                **_doors(413, 415, 422),
            },
        },
        "get": {
            "tags": ["mcp"],
            "summary": "MCP (streamable HTTP): the session's stream of server messages",
            "operationId": "mcp_get",
            "security": _SECURITY,
            "parameters": [_SESSION, _VERSION],
            "responses": {
                "200": {"description": "server-initiated messages", "content": _SSE},
                **_transport(400, "no Mcp-Session-Id: a JSON-RPC error"),
                **_transport(404, "unknown or ended session: a JSON-RPC error"),
                **_transport(406, "Accept lacks text/event-stream"),
                **_transport(409, "the session's stream is already open"),
                **_stateless("GET"),
                **_doors(),
            },
        },
        "delete": {
            "tags": ["mcp"],
            "summary": "MCP (streamable HTTP): end the session",
            "operationId": "mcp_delete",
            "security": _SECURITY,
            "parameters": [_SESSION, _VERSION],
            "responses": {
                "200": {"description": "the session ended"},
                **_transport(400, "no Mcp-Session-Id: a JSON-RPC error"),
                **_transport(404, "unknown or ended session: a JSON-RPC error"),
                **_stateless("DELETE"),
                **_doors(),
            },
        },
    }


def document_mcp(app: FastAPI) -> None:
    """Add ``/mcp`` to the app's OpenAPI document (built once, on first request)."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None or PATH not in app.openapi_schema.get("paths", {}):
            document = build()
            document.setdefault("paths", {})[PATH] = path_item()
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
