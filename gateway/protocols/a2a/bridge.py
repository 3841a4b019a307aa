"""The A2A bridge behind ``POST /`` and ``POST /tasks``: every non-``tasks.*`` method.

Requests are answered by the a2a-sdk's own ``JsonRpcDispatcher`` with its
v0.3 compatibility on, so both the A2A v1.0 method names (``SendMessage``,
``SendStreamingMessage``, ``GetTask``, ``CancelTask``, ``SubscribeToTask``, …)
and the v0.3 ones (``message/send``, ``message/stream``, ``tasks/get``,
``tasks/cancel``, ``tasks/resubscribe``, …) are served, with the A2A
specification's error codes (never seed 003's) and the SDK's version rule: a
v1.0 method needs the ``A2A-Version: 1.0`` header (the SDK clients send it),
a request without the header is taken as 0.3.

The dispatcher reads its request from a Starlette ``Request``: the bridge hands
it one carrying the JSON-RPC object (a batch member on its own) and, in the
ASGI scope, the authenticated caller, which ``SpindleContextBuilder`` puts on
the call context for ``SpindleRequestHandler``.

Unauthenticated calls: a single request gets HTTP 401 (``WWW-Authenticate:
Bearer``), as the A2A specification asks of HTTP bindings, with a JSON-RPC
error body (-32600, ``data.reason = "UNAUTHENTICATED"``: A2A defines no
JSON-RPC code for it); a batch member gets that error object.

Streaming methods (message/stream, tasks/resubscribe and their v1.0 names) take
one of the tenant's stream slots (``max_streams_per_tenant``) before the SDK
runs them, held until the stream ends; over the cap the answer is HTTP 429 with
``Retry-After`` and a JSON-RPC error (-32600, ``data.reason = "RATE_LIMITED"``).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder, ServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Scope

from spindle.gateway.protocols.a2a.request_handler import SpindleRequestHandler
from spindle.gateway.protocols.a2a.spindle_call import CALL_KEY
from spindle.gateway.protocols.a2a.v03_adapter import SpindleJSONRPC03Adapter
from spindle.gateway.protocols.jsonrpc.registry import set_a2a_bridge
from spindle.gateway.services.callers import caller_for
from spindle.gateway.services.run_streams import serve_under, take_slot
from spindle.gateway.services.state import app_state
from spindle.shared.contracts.errors import RateLimited, Unavailable
from spindle.shared.contracts.identity import Identity

log = logging.getLogger(__name__)

SCOPE_KEY = "spindle.a2a_call"
INVALID_REQUEST = -32600
# Methods answered with an SSE stream: refused inside a batch.
STREAMING_METHODS = frozenset(
    {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"}
)


NOTIFICATION_ID = "spindle-notification"
NOTIFIED_AS = {
    "SendStreamingMessage": "SendMessage",
    "message/stream": "message/send",
    "SubscribeToTask": "GetTask",
    "tasks/resubscribe": "tasks/get",
}


class SpindleContextBuilder(ServerCallContextBuilder):
    """The SDK's call context plus the Spindle caller the bridge put in the scope."""

    def __init__(self) -> None:
        self._default = DefaultServerCallContextBuilder()

    def build(self, request: Request) -> ServerCallContext:
        context = self._default.build(request)
        context.state[CALL_KEY] = request.scope.get(SCOPE_KEY)
        return context


def unauthenticated_error(request_id: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": INVALID_REQUEST,
            "message": "Unauthenticated: send an API key or JWT as a Bearer token",
            "data": {"reason": "UNAUTHENTICATED"},
        },
    }


def as_notification(payload: dict[str, Any]) -> dict[str, Any]:
    """What a notification does: a send starts or answers the run without waiting
    for it (nobody reads a reply), a streaming send is a plain send, a
    subscription (nothing to do without a reader) is a get."""
    method = NOTIFIED_AS.get(str(payload.get("method")), payload.get("method"))
    params = payload.get("params")
    if method in ("SendMessage", "message/send") and isinstance(params, dict):
        configuration = dict(params.get("configuration") or {})
        if method == "SendMessage":
            configuration["returnImmediately"] = True
        else:
            configuration["blocking"] = False
        params = {**params, "configuration": configuration}
    # The SDK's 0.3 models require an id: an internal one (the reply is dropped).
    notified = {**payload, "method": method, "id": NOTIFICATION_ID}
    if params is not None:
        notified["params"] = params
    return notified


def _rpc_id(payload: dict[str, Any]) -> Any:
    value = payload.get("id")
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


class A2ABridge:
    """Answers A2A JSON-RPC requests for the JSON-RPC route (``registry.A2A_BRIDGE``)."""

    def __init__(self) -> None:
        self.dispatcher = JsonRpcDispatcher(
            SpindleRequestHandler(),
            context_builder=SpindleContextBuilder(),
            enable_v0_3_compat=True,
        )
        # The SDK's 0.3 adapter answers bad params and push-config deletes against
        # the protocol (v03_adapter): ours replaces it. The dispatcher offers no
        # hook for this, hence the private attribute.
        self.dispatcher._v03_adapter = SpindleJSONRPC03Adapter(
            SpindleRequestHandler(), context_builder=SpindleContextBuilder()
        )
        self._app: Starlette | None = None

    def bind(self, app: Starlette) -> None:
        """Remember the app whose state batch members use when no request is passed."""
        self._app = app

    def _batch_request(self, payload: dict[str, Any]) -> Request:
        """A stand-in HTTP request for a batch member (the dispatcher did not pass its own).

        The A2A version is the one the method name belongs to (a batch has
        one set of headers for members of either version).
        """
        if self._app is None:
            raise RuntimeError(
                "the A2A bridge is not bound to an app (spindle.gateway.protocols.a2a.install_a2a)"
            )
        method = str(payload.get("method") or "")
        version = b"0.3" if "/" in method else b"1.0"
        settings = app_state(self._app).settings
        scope: Scope = {
            "type": "http",
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/",
            "raw_path": b"/",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"a2a-version", version), (b"content-type", b"application/json")],
            "server": (settings.gateway_host, settings.gateway_port),
            "app": self._app,
        }

        async def receive() -> Message:
            return {"type": "http.disconnect"}

        return Request(scope, receive)

    async def handle_single(
        self, request: Request, payload: dict[str, Any], identity: Identity | None
    ) -> Response:
        """One A2A request: JSON, or an SSE stream for the streaming methods."""
        if identity is None:
            return Response(
                orjson.dumps(unauthenticated_error(_rpc_id(payload))),
                status_code=401,
                media_type="application/json",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if "id" not in payload:  # a notification: carried out, never answered
            await self.dispatcher.handle_requests(
                _sub_request(request, as_notification(payload), identity)
            )
            return Response(status_code=204)
        if payload.get("method") in STREAMING_METHODS:
            return await self._stream(request, payload, identity)
        return await self.dispatcher.handle_requests(_sub_request(request, payload, identity))

    async def _stream(
        self, request: Request, payload: dict[str, Any], identity: Identity
    ) -> Response:
        """A streaming method, served under one of the tenant's stream slots."""
        caller = caller_for(request, identity)
        try:
            lease = await take_slot(caller)
        except (RateLimited, Unavailable) as exc:
            error = {
                "jsonrpc": "2.0",
                "id": _rpc_id(payload),
                "error": {
                    "code": INVALID_REQUEST,
                    "message": exc.detail,
                    "data": {
                        "reason": "RATE_LIMITED" if isinstance(exc, RateLimited) else "UNAVAILABLE"
                    },
                },
            }
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
            return Response(
                orjson.dumps(error),
                status_code=exc.status,
                media_type="application/json",
                headers=headers,
            )
        try:
            answer = await self.dispatcher.handle_requests(_sub_request(request, payload, identity))
        except BaseException:
            await lease.release()
            raise
        return serve_under(caller, answer, lease)

    async def handle_in_batch(
        self,
        payload: dict[str, Any],
        identity: Identity | None,
        request: Request | None = None,
    ) -> dict[str, Any] | None:
        """One A2A member of a batch (None for a notification); no streaming here."""
        notification = "id" not in payload
        if payload.get("method") in STREAMING_METHODS:
            error = {
                "jsonrpc": "2.0",
                "id": _rpc_id(payload),
                "error": {
                    "code": INVALID_REQUEST,
                    "message": "Invalid Request: streaming is not available inside a batch",
                    "data": {"reason": "send the streaming request alone"},
                },
            }
            return None if notification else error
        if identity is None:
            return None if notification else unauthenticated_error(_rpc_id(payload))
        if request is None:
            request = self._batch_request(payload)
        if notification:
            await self.dispatcher.handle_requests(
                _sub_request(request, as_notification(payload), identity)
            )
            return None
        response = await self.dispatcher.handle_requests(_sub_request(request, payload, identity))
        body: dict[str, Any] = orjson.loads(bytes(response.body))
        return body


def _sub_request(request: Request, payload: dict[str, Any], identity: Identity) -> Request:
    """A request like ``request`` whose body is ``payload``, carrying the caller."""
    body = orjson.dumps(payload)
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await request.receive()  # the client's disconnect, for SSE
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    scope: Scope = dict(request.scope)
    scope[SCOPE_KEY] = caller_for(request, identity)
    return Request(scope, receive)


BRIDGE = A2ABridge()
set_a2a_bridge(BRIDGE)
