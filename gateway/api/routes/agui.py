"""AG-UI 1.0: ``POST /agui/{graph}`` takes a ``RunAgentInput`` and answers with AG-UI events.

The mapping is in ``spindle.gateway.protocols.agui`` and docs/protocols.md
(AG-UI). Auth is the same as every route's (API key or JWT; stream tokens are
refused, the route is not in ``STREAM_TOKEN_ROUTES``). The stream holds one of
the tenant's stream slots (``max_streams_per_tenant``) until it ends; a new run
counts against the run-start limit. Errors before the stream starts are
problem+json (404 unknown graph/thread, 422 bad input or a refused answer, 409
no such interrupt, 429 over a limit); a run that fails is AG-UI's RUN_ERROR.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Request
from starlette.responses import Response, StreamingResponse

from spindle.gateway.api.deps import BaseUrlDep, IdentityDep, LimitsDep
from spindle.gateway.protocols.agui.event_mapper import parse_event_id
from spindle.gateway.protocols.agui.models import AguiRunInput
from spindle.gateway.protocols.agui.run_stream import AguiCall, AguiEventStream, open_agui_run
from spindle.gateway.streams.sse import SSE_HEADERS
from spindle.shared.contracts.errors import InvalidRequest

router = APIRouter(tags=["ag-ui"])

AGUI_EVENT_SCHEMA: dict[str, object] = {
    "type": "string",
    "description": "SSE: `id: <seq>.<k>` then `data: <AG-UI event JSON>` per event",
}
AGUI_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {
        "description": (
            "text/event-stream of AG-UI 1.0 events: RUN_STARTED … RUN_FINISHED (success, "
            "interrupt or cancelled) or RUN_ERROR; `: keep-alive` comments when idle"
        ),
        "content": {"text/event-stream": {"schema": AGUI_EVENT_SCHEMA}},
    },
    400: {"description": "Last-Event-ID is not an AG-UI event id of this run (problem+json)"},
    401: {"description": "missing, invalid or expired credentials (problem+json)"},
    404: {"description": "unknown graph, thread or AG-UI run (problem+json)"},
    409: {"description": "the thread's run does not wait on that interrupt (problem+json)"},
    422: {"description": "bad RunAgentInput, run input or answer (problem+json)"},
    429: {"description": "over the run-start or stream limit (problem+json)"},
}


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
    request: Request,
    *,
    identity: IdentityDep,
    limits: LimitsDep,
    base_url: BaseUrlDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    after = _cursor(last_event_id)
    call = AguiCall(identity=identity, state=request.app.state, base_url=base_url)
    lease = await limits.open_stream(identity.tenant_id)
    try:
        record = await open_agui_run(call, graph, body, reconnecting=after is not None)
        stream = AguiEventStream(call, body, record, after)
        await stream.open()
    except BaseException:
        await lease.release()
        raise

    async def frames() -> AsyncIterator[bytes]:
        try:
            async with contextlib.aclosing(stream.frames()) as chunks:
                async for chunk in chunks:
                    yield chunk
        finally:
            await stream.close()

    response = StreamingResponse(
        frames(), media_type="text/event-stream", headers=dict(SSE_HEADERS)
    )
    return limits.holding(response, lease)
