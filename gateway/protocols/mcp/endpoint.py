"""``/mcp``: the SDK's streamable-HTTP transport behind Spindle's own auth and limits.

Every request is authenticated like the REST routes (API key or JWT; the tenant
comes from the identity); a stream token (run-scoped, for browsers' EventSource)
is refused, as on every route outside ``STREAM_TOKEN_ROUTES``. The caller is put
in the ASGI scope for the tool handlers (``tools.McpCaller``). A ``GET`` opens the
session's standalone SSE stream and holds one of the tenant's stream slots while
it is open; a ``tools/call`` holds one while it follows its run (``tools._follow``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from spindle.gateway.api.deps import base_url
from spindle.gateway.http.problems import spindle_problem
from spindle.gateway.protocols.mcp.tools import SCOPE_KEY, McpCaller, build_server
from spindle.shared.contracts.errors import Forbidden, SpindleError

PATH = "/mcp"


class _Sessions(Response):
    """The session manager's answer as a response ``TenantLimits.holding`` can hold."""

    def __init__(self, sessions: StreamableHTTPSessionManager) -> None:
        # Not Response.__init__: the SDK renders everything itself.
        self.sessions = sessions
        self.status_code = 200
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.sessions.handle_request(scope, receive, send)


class McpEndpoint:
    """The ASGI app served at ``/mcp`` (see the module docstring)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        state = request.app.state
        try:
            identity = await state.authenticator.authenticate(request)
            if identity.run_scope is not None:
                raise Forbidden("a stream token may only read its own run's stream and history")
            scope[SCOPE_KEY] = McpCaller(identity, state, base_url(request))
            answer: Response = _Sessions(state.mcp_sessions)
            if request.method == "GET":
                lease = await state.limits.open_stream(identity.tenant_id)
                answer = state.limits.holding(answer, lease)
        except SpindleError as exc:
            await spindle_problem(exc, instance=PATH)(scope, receive, send)
            return
        await answer(scope, receive, send)


@asynccontextmanager
async def mcp_sessions(app: FastAPI) -> AsyncIterator[None]:
    """Run the MCP session manager for the app's lifespan (one per process)."""
    sessions = StreamableHTTPSessionManager(app=build_server())
    app.state.mcp_sessions = sessions
    async with sessions.run():
        yield


def install_mcp(app: FastAPI) -> None:
    """Serve MCP at ``/mcp`` (not in the OpenAPI document: it is a JSON-RPC transport)."""
    app.router.routes.append(Route(PATH, endpoint=McpEndpoint(), methods=["GET", "POST", "DELETE"]))
