"""AG-UI 1.0: ``POST /agui/{graph}`` takes a ``RunAgentInput`` and answers with AG-UI events.

The mapping is in ``spindle.gateway.protocols.agui`` and docs/protocols/agui.md
(AG-UI). Auth is the same as every route's (API key or JWT; stream tokens are
refused, the route is not in ``STREAM_TOKEN_ROUTES``). The stream holds one of
the tenant's stream slots (``max_streams_per_tenant``) until it ends; a new run
counts against the run-start limit. Errors of the request are problem+json
before the stream starts (404 unknown graph or AG-UI run, 403 not the thread's,
422 a bad body or run input, 429 over a limit); what AG-UI's interrupt rules
refuse (a missing, unknown, stale, expired or refused resume, a busy thread) is
a stream of one RUN_ERROR with a ``code``, and a run that fails is RUN_ERROR too.
When the gateway stops, open streams end at once with a ``retry:`` hint, like
the run stream (spindle.gateway.http.stream_drain).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header
from starlette.responses import Response, StreamingResponse

from spindle.gateway.api.deps import CallerDep
from spindle.gateway.http.stream_drain import StreamDrain
from spindle.gateway.protocols.agui.event_mapper import parse_event_id
from spindle.gateway.protocols.agui.models import AguiRejection, AguiRunInput
from spindle.gateway.protocols.agui.run_stream import AguiEventStream, open_agui_run
from spindle.gateway.services.run_streams import serve_under, take_slot
from spindle.gateway.streams.sse import SSE_HEADERS
from spindle.shared.contracts.errors import InvalidRequest

router = APIRouter(tags=["ag-ui"])

# One Server-Sent Event, as OpenAPI 3.1 documents the items of ``text/event-stream``
# (the same shape as the run stream's SSE_EVENT_SCHEMA; validators read each event).
AGUI_EVENT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": "one AG-UI 1.0 event as JSON (RUN_STARTED … RUN_FINISHED or RUN_ERROR)",
        },
        "id": {"type": "string", "description": "`<seq>.<k>`: the message's sequence and index"},
        "event": {"type": "string", "description": "absent (the default 'message' event)"},
        "retry": {"type": "integer", "description": "reconnection delay, in milliseconds"},
    },
    "required": ["data"],
}
AGUI_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {
        "description": (
            "text/event-stream of AG-UI 1.0 events: RUN_STARTED … RUN_FINISHED (success, "
            "interrupt or cancelled) or RUN_ERROR; `: keep-alive` comments when idle. An "
            "input the interrupt rules refuse is one RUN_ERROR with a `code` "
            "(INTERRUPT_PENDING, UNKNOWN_INTERRUPT, INTERRUPT_EXPIRED, INVALID_RESUME, RUN_BUSY)"
        ),
        "content": {"text/event-stream": {"schema": AGUI_EVENT_SCHEMA}},
    },
    400: {"description": "Last-Event-ID is not an AG-UI event id of this run (problem+json)"},
    401: {"description": "missing, invalid or expired credentials (problem+json)"},
    403: {"description": "the caller may not control the thread's run (problem+json)"},
    404: {"description": "unknown graph, or AG-UI run on a reconnect (problem+json)"},
    409: {"description": "that AG-UI run is still being started: retry (problem+json)"},
    422: {"description": "bad RunAgentInput or run input (problem+json)"},
    429: {"description": "over the run-start or stream limit (problem+json)"},
}


async def until_drained(
    chunks: AsyncGenerator[bytes, None], drain: StreamDrain | None
) -> AsyncGenerator[bytes, None]:
    """``chunks`` until they end, or until this gateway stops: then a ``retry:`` goodbye.

    Chunks are whole SSE events, so a stream cut here leaves no half event: the
    client posts the same RunAgentInput again with ``Last-Event-ID``
    (spindle.gateway.http.stream_drain).
    """
    if drain is None:
        async for chunk in chunks:
            yield chunk
        return
    stopping = asyncio.ensure_future(drain.wait())
    try:
        while True:
            step = asyncio.ensure_future(anext(chunks))
            await asyncio.wait({step, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await step
                yield drain.goodbye()
                return
            try:
                chunk = step.result()
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        stopping.cancel()


async def _one(frame: bytes) -> AsyncIterator[bytes]:
    yield frame


def _cursor(value: str | None) -> tuple[int, int] | None:
    if value is None or not value.strip():
        return None
    cursor = parse_event_id(value)
    if cursor is None:
        raise InvalidRequest(
            "Last-Event-ID must be an event id of this stream ('<seq>.<index>')",
            errors=[{"field": "Last-Event-ID", "rule": "event_id", "message": f"got {value!r}"}],
        )
    return cursor


@router.post(
    "/agui/{graph}",
    summary="AG-UI 1.0: run a graph (or resume it) and stream AG-UI events",
    response_class=StreamingResponse,
    responses=AGUI_RESPONSES,
)
async def run_agent(
    graph: str,
    body: AguiRunInput,
    *,
    call: CallerDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    after = _cursor(last_event_id)
    lease = await take_slot(call)
    try:
        record = await open_agui_run(call, graph, body, reconnecting=after is not None)
        if isinstance(record, AguiRejection):
            await lease.release()
            return StreamingResponse(
                _one(record.frame()), media_type="text/event-stream", headers=dict(SSE_HEADERS)
            )
        stream = AguiEventStream(call, body, record, after)
        await stream.open()
    except BaseException:
        await lease.release()
        raise

    drain: StreamDrain | None = call.state.stream_drain

    async def frames() -> AsyncIterator[bytes]:
        if drain is not None:
            drain.opened()
        try:
            async with contextlib.aclosing(stream.frames()) as chunks:
                async for chunk in until_drained(chunks, drain):
                    yield chunk
        finally:
            if drain is not None:
                drain.closed()
            await stream.close()

    response = StreamingResponse(
        frames(), media_type="text/event-stream", headers=dict(SSE_HEADERS)
    )
    return serve_under(call, response, lease)
