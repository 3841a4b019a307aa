"""JSON-RPC 2.0 over WebSocket at ``/ws`` (seed 003's MAY: "WebSocket for streaming").

Each text frame is one JSON-RPC body (a call, a notification or a batch) and is
answered by the HTTP endpoint's dispatcher itself (``dispatcher.answer``, fed a
request built from the frame and the handshake's headers), so the methods,
checks and error codes are exactly ``POST /``'s. A call the HTTP endpoint
answers with a stream (``tasks.execute`` with streaming, A2A
``message/stream`` / ``tasks/resubscribe``) gets each event as a
``stream.event`` notification instead (``request_id``: the call's id, ``id``:
the event's ``seq``, ``event``: its name, ``data``: its payload), then its
response (``{"stream": "ended", "events": n}``) once the stream ends.

Auth: the same credential as ``POST /`` (``Authorization: Bearer`` or
``X-API-Key``) on the handshake; a client that cannot set headers (a browser)
sends ``{"method": "auth", "params": {"api_key": ...}}`` as its first frame
instead. Never a query parameter: URLs end up in access logs, proxies and
browser history. Bad or missing credentials close the connection with 1008.

Frames: a binary frame closes with 1003, one larger than ``ws_max_message_bytes``
with 1009; text that is not JSON is a -32700 response and the connection stays
open. Each connection has ``ws_max_calls`` calls in flight at most (one more is
answered -32000 at once) and ``ws_send_queue`` messages waiting to be sent (a
producer waits while it is full: a slow reader slows its own streams, nothing
is dropped). docs/protocols/jsonrpc.md, "WebSocket".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Scope
from starlette.websockets import WebSocket, WebSocketDisconnect

from spindle.gateway.api.deps import authenticate
from spindle.gateway.protocols.jsonrpc import dispatcher
from spindle.gateway.protocols.jsonrpc.protocol import error_response, result_response
from spindle.gateway.services.state import gateway_state
from spindle.shared.contracts.errors import SpindleError

log = logging.getLogger(__name__)

PATH = "/ws"
AUTH_METHOD = "auth"
EVENT_METHOD = "stream.event"
SERVER_BUSY = -32000

# Close codes (RFC 6455 section 7.4.1).
POLICY_VIOLATION = 1008  # bad or missing credentials
UNSUPPORTED_DATA = 1003  # a binary frame
MESSAGE_TOO_BIG = 1009

_HOP_HEADERS = {
    b"upgrade",
    b"connection",
    b"sec-websocket-key",
    b"sec-websocket-version",
    b"sec-websocket-extensions",
    b"sec-websocket-protocol",
}


class Closing(Exception):
    """The connection must close with ``code`` (bad credentials or a bad frame)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def http_scope(ws_scope: Scope, authorization: str | None = None) -> Scope:
    """An HTTP ``POST /`` scope carrying the handshake's headers (and ``authorization``)."""
    headers = [
        (name, value)
        for name, value in ws_scope.get("headers", [])
        if name.lower() not in _HOP_HEADERS and name.lower() != b"content-type"
    ]
    if authorization is not None:
        headers = [h for h in headers if h[0].lower() not in (b"authorization", b"x-api-key")]
        headers.append((b"authorization", f"Bearer {authorization}".encode()))
    headers.append((b"content-type", b"application/json"))
    scope = dict(ws_scope)
    scope.update(
        type="http", method="POST", path="/", raw_path=b"/", query_string=b"", headers=headers
    )
    scope.pop("subprotocols", None)
    return scope


def _has_credentials(scope: Scope) -> bool:
    names = {name.lower() for name, _ in scope.get("headers", [])}
    return b"authorization" in names or b"x-api-key" in names


class Connection:
    """One ``/ws`` connection: reads frames, runs calls, sends through one bounded queue."""

    def __init__(self, websocket: WebSocket) -> None:
        self.ws = websocket
        settings = gateway_state(websocket).settings
        self.max_calls = settings.ws_max_calls
        self.max_bytes = settings.ws_max_message_bytes
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue(maxsize=settings.ws_send_queue)
        self.calls: set[asyncio.Task[None]] = set()
        self.closed = asyncio.Event()
        self.scope: Scope = http_scope(websocket.scope)

    async def serve(self) -> None:
        await self.ws.accept()
        sender = asyncio.create_task(self._send_loop())
        try:
            if _has_credentials(self.ws.scope):
                await self._check(self.scope)
            else:
                await self._first_frame_auth()
            while True:
                self._start_call(await self._read())
        except Closing as exc:
            await self._flush()
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await self.ws.close(exc.code, exc.reason)
        except WebSocketDisconnect:
            pass
        finally:
            self.closed.set()
            for call in list(self.calls):
                call.cancel()
            await asyncio.gather(*self.calls, return_exceptions=True)
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)

    async def _check(self, scope: Scope) -> None:
        try:
            await authenticate(Request(scope))
        except SpindleError as exc:
            raise Closing(POLICY_VIOLATION, f"unauthorized: {exc.detail}"[:120]) from exc

    async def _first_frame_auth(self) -> None:
        """A browser's credential: ``{"method": "auth", "params": {"api_key": ...}}`` first."""
        frame = await self._read()
        try:
            call = orjson.loads(frame)
        except orjson.JSONDecodeError:
            call = None
        params = call.get("params") if isinstance(call, dict) else None
        key = params.get("api_key") if isinstance(params, dict) else None
        if (
            not isinstance(call, dict)
            or call.get("method") != AUTH_METHOD
            or not isinstance(key, str)
        ):
            raise Closing(
                POLICY_VIOLATION,
                "unauthorized: send credentials on the handshake or an 'auth' call first",
            )
        scope = http_scope(self.ws.scope, authorization=key)
        await self._check(scope)
        self.scope = scope
        if "id" in call:
            await self.outbox.put(
                orjson.dumps(result_response(call["id"], {"authenticated": True}))
            )

    async def _read(self) -> bytes:
        message = await self.ws.receive()
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        if message.get("text") is None:
            raise Closing(UNSUPPORTED_DATA, "JSON-RPC frames are text")
        text: str = message["text"]
        data = text.encode()
        if len(data) > self.max_bytes:
            raise Closing(MESSAGE_TOO_BIG, f"a frame holds at most {self.max_bytes} bytes")
        return data

    def _start_call(self, frame: bytes) -> None:
        if len(self.calls) >= self.max_calls:
            reason = f"{self.max_calls} calls are in flight on this connection (ws_max_calls)"
            busy = error_response(_id_of(frame), SERVER_BUSY, "Server busy", {"reason": reason})
            self._start(self.outbox.put(orjson.dumps(busy)))
            return
        self._start(self._answer(frame))

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        call = asyncio.create_task(work)
        self.calls.add(call)
        call.add_done_callback(self.calls.discard)

    async def _answer(self, frame: bytes) -> None:
        delivered = False

        async def receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": frame, "more_body": False}
            await self.closed.wait()
            return {"type": "http.disconnect"}

        try:
            scope = dict(self.scope)  # one per call: a request may write to its scope
            response = await dispatcher.answer(Request(scope, receive))
            await Relay(self, frame).run(response, scope, receive)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("/ws: a call failed")
            await self.outbox.put(orjson.dumps(error_response(_id_of(frame), -32603)))

    async def _send_loop(self) -> None:
        while True:
            data = await self.outbox.get()
            await self.ws.send_text(data.decode())

    async def _flush(self) -> None:
        """Send what is queued before a close (e.g. the auth refusal's reason)."""
        while not self.outbox.empty():
            await self.ws.send_text(self.outbox.get_nowait().decode())


def _id_of(frame: bytes) -> Any:
    with contextlib.suppress(orjson.JSONDecodeError):
        document = orjson.loads(frame)
        if isinstance(document, dict):
            value = document.get("id")
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                return value
    return None


def _is_notification(frame: bytes) -> bool:
    with contextlib.suppress(orjson.JSONDecodeError):
        document = orjson.loads(frame)
        return isinstance(document, dict) and "id" not in document
    return False


class Relay:
    """Runs the HTTP endpoint's response and puts it on the connection as WebSocket messages.

    A JSON body is sent as it is; a ``text/event-stream`` body is split into its
    events, each a ``stream.event`` notification, followed by the call's response.
    """

    def __init__(self, connection: Connection, frame: bytes) -> None:
        self.connection = connection
        self.request_id = _id_of(frame)
        self.notification = _is_notification(frame)
        self.streaming = False
        self.buffer = b""
        self.events = 0
        self.failed: dict[str, Any] | None = None

    async def run(self, response: Response, scope: Scope, receive: Any) -> None:
        await response(scope, receive, self.send)
        if self.streaming and not self.notification:
            if self.failed is not None:
                answer = error_response(
                    self.request_id,
                    self.failed.get("code", -32603),
                    self.failed.get("message"),
                    self.failed.get("data"),
                )
            else:
                answer = result_response(
                    self.request_id, {"stream": "ended", "events": self.events}
                )
            await self.connection.outbox.put(orjson.dumps(answer))
        elif self.buffer.strip():
            await self.connection.outbox.put(self.buffer)

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = {k.lower(): v for k, v in message.get("headers", [])}
            self.streaming = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            return
        if message["type"] != "http.response.body":
            return
        self.buffer += message.get("body", b"")
        if self.streaming:
            # SSE lines may end in CRLF (sse-starlette's): one form to split on.
            self.buffer = self.buffer.replace(b"\r\n", b"\n")
            while b"\n\n" in self.buffer:
                block, self.buffer = self.buffer.split(b"\n\n", 1)
                await self._event(block)

    async def _event(self, block: bytes) -> None:
        fields: dict[str, str] = {}
        data: list[str] = []
        for line in block.decode().splitlines():
            if not line or line.startswith(":"):
                continue  # keep-alive comments: the WebSocket has its own pings
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            else:
                fields[name] = value
        if not data:
            return
        payload: Any = "\n".join(data)
        with contextlib.suppress(orjson.JSONDecodeError):
            payload = orjson.loads(payload)
        event = fields.get("event", "message")
        if isinstance(payload, dict) and payload.get("jsonrpc") == "2.0":
            # A2A streams frame each event as a JSON-RPC response: its result is the event.
            if "error" in payload:
                self.failed = payload["error"]
                return
            payload = payload.get("result")
        seq: Any = fields.get("id")
        if isinstance(seq, str) and seq.isdigit():
            seq = int(seq)
        self.events += 1
        params = {"request_id": self.request_id, "id": seq, "event": event, "data": payload}
        await self.connection.outbox.put(
            orjson.dumps({"jsonrpc": "2.0", "method": EVENT_METHOD, "params": params})
        )


async def jsonrpc_websocket(websocket: WebSocket) -> None:
    """Serve JSON-RPC 2.0 on one WebSocket connection (see the module docstring)."""
    await Connection(websocket).serve()
