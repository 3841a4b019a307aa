"""``/mcp``: the SDK's streamable-HTTP transport behind Spindle's own auth and limits.

Every request is authenticated like the REST routes (API key or JWT; the tenant
comes from the identity); a stream token (run-scoped, for browsers' EventSource)
is refused, as on every route outside ``STREAM_TOKEN_ROUTES``. The caller is put
in the ASGI scope for the tool handlers (a ``services.callers.Caller``). A ``GET`` opens the
session's standalone SSE stream and holds one of the tenant's stream slots while
it is open; a ``tools/call`` holds one while it follows its run (``tools._follow``).
A session is bound to the caller who opened it (the SDK's own check, fed with
``principal``): anyone else naming it is answered as for an unknown session. A POST that is not
``application/json`` gets 415 problem+json, like every JSON route.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from spindle.gateway.http.problems import UnsupportedMediaType, spindle_problem
from spindle.gateway.protocols.mcp.openapi import document_mcp
from spindle.gateway.protocols.mcp.server import build_server
from spindle.gateway.protocols.mcp.tools import SCOPE_KEY
from spindle.gateway.services.callers import caller_for
from spindle.gateway.services.run_streams import hold_slot
from spindle.gateway.services.state import GatewayState, gateway_state
from spindle.shared.contracts.errors import Forbidden, SpindleError, Unavailable
from spindle.shared.contracts.identity import Identity

PATH = "/mcp"


class _Sessions(Response):
    """The session manager's answer as a response a stream slot can hold (``hold_slot``)."""

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
        state = gateway_state(request)
        try:
            identity = await state.authenticator.authenticate(request)
            if identity.run_scope is not None:
                raise Forbidden("a stream token may only read its own run's stream and history")
            if request.method == "POST" and not _json(request.headers.get("content-type")):
                # The SDK answers a bare 400 text; every other route says 415.
                raise UnsupportedMediaType("an MCP message is sent as application/json")
            # The SDK binds a session (and a 2026-07-28 requestState) to the
            # principal of scope["user"]: another caller naming it gets "Session
            # not found", exactly as for an unknown session.
            scope["user"] = principal(identity)
            caller = caller_for(request, identity)
            scope[SCOPE_KEY] = caller
            if state.mcp_sessions is None:  # only outside the app's lifespan
                raise Unavailable("MCP sessions are not running")
            answer: Response = _Sessions(state.mcp_sessions)
            if request.method == "GET":
                answer = await hold_slot(caller, answer)
        except SpindleError as exc:
            await spindle_problem(exc, instance=PATH)(scope, receive, send)
            return
        await answer(scope, receive, send)


def principal(identity: Identity) -> AuthenticatedUser:
    """The MCP SDK's user for ``identity``: tenant as client, user as subject (no token)."""
    return AuthenticatedUser(
        AccessToken(token="", client_id=identity.tenant_id, subject=identity.user_id, scopes=[])
    )


def _json(content_type: str | None) -> bool:
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"


@asynccontextmanager
async def mcp_sessions(state: GatewayState) -> AsyncIterator[None]:
    """Run the MCP session manager for the app's lifespan (one per process)."""
    sessions = StreamableHTTPSessionManager(app=build_server())
    state.mcp_sessions = sessions
    async with sessions.run():
        yield


def install_mcp(app: FastAPI) -> None:
    """Serve MCP at ``/mcp``, described in the OpenAPI document (``openapi.path_item``)."""
    app.router.routes.append(Route(PATH, endpoint=McpEndpoint(), methods=["GET", "POST", "DELETE"]))
    document_mcp(app)
