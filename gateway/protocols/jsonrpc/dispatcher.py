"""Answer a JSON-RPC 2.0 HTTP body: single calls, batches and notifications.

``tasks.*`` methods go to the handlers of :mod:`spindle.gateway.protocols.jsonrpc.registry` and
are answered with seed 003's codes; every other method goes to the A2A bridge
(answered with the A2A specification's codes), or is "method not found" when
no bridge is installed. JSON-RPC errors are answered with HTTP 200 (a batch may
mix successes and failures, so the HTTP status cannot describe one call);
an unauthenticated ``tasks.*`` call gets -32004 in that body. A body of only
notifications is answered with HTTP 204 and no body. A batch longer than the
``jsonrpc_max_batch`` setting is refused whole (-32600) before any member runs.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from pymongo.errors import ConnectionFailure
from starlette.requests import Request
from starlette.responses import Response

from spindle.gateway.api.deps import authenticate
from spindle.gateway.protocols.jsonrpc import registry
from spindle.gateway.protocols.jsonrpc.protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Call,
    Rejected,
    error_from_exception,
    error_response,
    parse_body,
    result_response,
)
from spindle.gateway.protocols.jsonrpc.registry import RpcContext, StreamingResult
from spindle.gateway.services.callers import caller_for
from spindle.gateway.services.state import gateway_state
from spindle.shared.contracts.errors import SpindleError, Unauthorized, Unavailable
from spindle.shared.contracts.identity import Identity

log = logging.getLogger(__name__)

JSON = "application/json"


def json_response(body: Any) -> Response:
    return Response(orjson.dumps(body), status_code=200, media_type=JSON)


async def caller(request: Request) -> Identity | None:
    """The authenticated caller, or None when the credentials are missing or bad.

    Stream tokens only read one run's stream: they do not call methods
    (``deps.authenticate`` refuses them here with ``Forbidden``, an ``Unauthorized``).
    """
    try:
        return await authenticate(request)
    except Unauthorized:
        return None


def _not_json(request: Request) -> bool:
    """A Content-Type header is sent and it is not JSON."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return bool(kind) and kind != "application/json" and not kind.endswith("+json")


async def answer(request: Request) -> Response:
    """The HTTP response to a JSON-RPC body on ``request``."""
    parsed = parse_body(await request.body())
    if parsed.error is not None:
        if parsed.error["error"]["code"] == PARSE_ERROR and _not_json(request):
            # A body that is not JSON and says so: the HTTP answer (the A2A TCK
            # accepts it; -32005 would be seed 003's RateLimited).
            return Response(
                "Content-Type must be application/json",
                status_code=415,
                media_type="text/plain",
                headers={"Accept": "application/json"},
            )
        return json_response(parsed.error)
    cap = gateway_state(request).settings.jsonrpc_max_batch
    if parsed.batch and len(parsed.members) > cap:
        reason = (
            f"a batch holds at most {cap} requests (jsonrpc_max_batch); "
            f"this one has {len(parsed.members)}: send it in smaller batches"
        )
        return json_response(error_response(None, INVALID_REQUEST, data={"reason": reason}))
    identity = await caller(request)
    if not parsed.batch:
        member = parsed.members[0]
        if isinstance(member, Rejected):
            return json_response(member.response)
        return await _answer_single(request, member, identity)
    responses: list[dict[str, Any]] = []
    for member in parsed.members:
        if isinstance(member, Rejected):
            responses.append(member.response)
            continue
        response = await _answer_in_batch(request, member, identity)
        if response is not None:
            responses.append(response)
    if not responses:
        return Response(status_code=204)
    return json_response(responses)


async def _answer_single(request: Request, call: Call, identity: Identity | None) -> Response:
    if not call.method.startswith(registry.TASKS_PREFIX):
        bridge = registry.get_a2a_bridge()
        if bridge is None:
            return _maybe(call, error_response(call.id, METHOD_NOT_FOUND))
        return await bridge.handle_single(request, call.payload, identity)
    outcome = await _run_task_method(request, call, identity, in_batch=False)
    if isinstance(outcome, StreamingResult):
        return outcome.response
    return _maybe(call, outcome)


async def _answer_in_batch(
    request: Request, call: Call, identity: Identity | None
) -> dict[str, Any] | None:
    if not call.method.startswith(registry.TASKS_PREFIX):
        bridge = registry.get_a2a_bridge()
        if bridge is None:
            return None if call.is_notification else error_response(call.id, METHOD_NOT_FOUND)
        return await bridge.handle_in_batch(call.payload, identity, request=request)
    outcome = await _run_task_method(request, call, identity, in_batch=True)
    if isinstance(outcome, StreamingResult):
        outcome = error_response(
            call.id,
            INVALID_REQUEST,
            data={"reason": "streaming is not available inside a batch: send it alone"},
        )
    return None if call.is_notification else outcome


def _maybe(call: Call, body: dict[str, Any]) -> Response:
    if call.is_notification:
        return Response(status_code=204)
    return json_response(body)


async def _run_task_method(
    request: Request, call: Call, identity: Identity | None, *, in_batch: bool
) -> dict[str, Any] | StreamingResult:
    handler = registry.TASK_METHODS.get(call.method)
    if handler is None:
        return error_response(call.id, METHOD_NOT_FOUND, data={"method": call.method})
    if identity is None:
        return error_from_exception(call.id, Unauthorized("valid credentials are required"))
    if call.params is None:
        return error_response(
            call.id,
            INVALID_PARAMS,
            data={"field": "params", "reason": "tasks.* methods take named params (an object)"},
        )
    ctx = RpcContext(
        request=request,
        caller=caller_for(request, identity),
        envelope=call.payload,
        in_batch=in_batch,
    )
    try:
        result = await handler(call.params, ctx)
    except SpindleError as exc:
        return error_from_exception(call.id, exc)
    except ConnectionFailure as exc:
        log.warning("%s: MongoDB unavailable: %s", call.method, exc)
        return error_from_exception(call.id, Unavailable("the task store is unavailable"))
    except Exception:
        log.exception("JSON-RPC method %s failed", call.method)
        return error_response(call.id, INTERNAL_ERROR)
    if isinstance(result, StreamingResult):
        return result
    return result_response(call.id, result)
