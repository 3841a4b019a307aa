"""``/mcp``: the SDK's streamable-HTTP transport behind Spindle's own auth and limits.

Every request is authenticated like the REST routes (API key or JWT; the tenant
comes from the identity); a stream token (run-scoped, for browsers' EventSource)
is refused, as on every route outside ``STREAM_TOKEN_ROUTES``. The caller is put
in the ASGI scope for the tool handlers (``tools.McpCaller``). A ``GET`` opens the
session's standalone SSE stream and holds one of the tenant's stream slots while
it is open; a ``tools/call`` holds one while it follows its run (``tools._follow``).
A session is bound to the caller who opened it (``SessionOwners``): anyone else
naming it is answered as for an unknown session. A POST that is not
``application/json`` gets 415 problem+json, like every JSON route.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import orjson
from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from spindle.gateway.api.deps import base_url
from spindle.gateway.http.problems import UnsupportedMediaType, spindle_problem
from spindle.gateway.protocols.mcp.openapi import document_mcp
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


Owner = tuple[str, str]  # (tenant_id, user_id)
SESSION_HEADER = "mcp-session-id"
# Sessions whose owner one process remembers; the SDK closes a session after
# 30 idle minutes, so this many would take more new sessions in that time than
# a gateway serves. A forgotten owner's session answers as unknown (start again).
MAX_SESSIONS = 50_000
_NOT_FOUND = orjson.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
)


class SessionOwners:
    """Who opened each MCP session: a session is used by its opener only.

    The SDK's sessions are not tied to a caller; the MCP specification asks
    servers to bind them to the user. Another caller (of this tenant or any
    other) naming a session gets exactly the answer of an unknown session.
    """

    def __init__(self, capacity: int = MAX_SESSIONS) -> None:
        self.capacity = capacity
        self._owners: OrderedDict[str, Owner] = OrderedDict()

    def owns(self, session_id: str, owner: Owner) -> bool:
        if self._owners.get(session_id) != owner:
            return False
        self._owners.move_to_end(session_id)
        return True

    def recording(self, send: Send, owner: Owner) -> Send:
        """``send`` that remembers the session a successful answer opens."""

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", ()):
                    if name.lower() == SESSION_HEADER.encode():
                        self._owners[value.decode("latin-1")] = owner
                        self._owners.move_to_end(value.decode("latin-1"))
                        while len(self._owners) > self.capacity:
                            self._owners.popitem(last=False)
            await send(message)

        return sending


class McpEndpoint:
    """The ASGI app served at ``/mcp`` (see the module docstring)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        state = request.app.state
        try:
            identity = await state.authenticator.authenticate(request)
            if identity.run_scope is not None:
                raise Forbidden("a stream token may only read its own run's stream and history")
            if request.method == "POST" and not _json(request.headers.get("content-type")):
                # The SDK answers a bare 400 text; every other route says 415.
                raise UnsupportedMediaType("an MCP message is sent as application/json")
            owner = (identity.tenant_id, identity.user_id)
            owners: SessionOwners = state.mcp_owners
            session_id = request.headers.get(SESSION_HEADER)
            if session_id is not None and not owners.owns(session_id, owner):
                await _unknown_session(send)
                return
            send = owners.recording(send, owner)
            scope[SCOPE_KEY] = McpCaller(identity, state, base_url(request))
            answer: Response = _Sessions(state.mcp_sessions)
            if request.method == "GET":
                lease = await state.limits.open_stream(identity.tenant_id)
                answer = state.limits.holding(answer, lease)
        except SpindleError as exc:
            await spindle_problem(exc, instance=PATH)(scope, receive, send)
            return
        await answer(scope, receive, send)


async def _unknown_session(send: Send) -> None:
    """The SDK's answer to a session it does not know (byte for byte the same shape)."""
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(_NOT_FOUND))]
    await send({"type": "http.response.start", "status": 404, "headers": headers})
    await send({"type": "http.response.body", "body": _NOT_FOUND})


def _json(content_type: str | None) -> bool:
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"


@asynccontextmanager
async def mcp_sessions(app: FastAPI) -> AsyncIterator[None]:
    """Run the MCP session manager for the app's lifespan (one per process)."""
    sessions = StreamableHTTPSessionManager(app=build_server())
    app.state.mcp_sessions = sessions
    app.state.mcp_owners = SessionOwners()
    async with sessions.run():
        yield


def install_mcp(app: FastAPI) -> None:
    """Serve MCP at ``/mcp``, described in the OpenAPI document (``openapi.path_item``)."""
    app.router.routes.append(Route(PATH, endpoint=McpEndpoint(), methods=["GET", "POST", "DELETE"]))
    document_mcp(app)
