"""Phase 2 of seed 002's two-phase streaming: the run's messages over SSE.

See ``spindle.gateway.streams.follower`` for the no-gap/no-duplicate protocol
(docs/streaming/gap-free.md) and ``spindle.gateway.streams.sse`` for the
framing. The token of browser clients arrives in ``access_token`` (EventSource
cannot send headers): best a short-lived stream token from ``POST …/stream-token``, scoped
to the one run; it is masked in the access log. Each open stream holds one of
its tenant's ``max_streams_per_tenant`` slots until it ends.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from pydantic import BaseModel

from spindle.gateway.api.deps import (
    BaseUrlDep,
    BusDep,
    CallerDep,
    IdentityDep,
    ReadableRunDep,
)
from spindle.gateway.models import SSE_EVENT_SCHEMA
from spindle.gateway.services.run_streams import RunFollow, open_run_events
from spindle.gateway.services.state import gateway_state
from spindle.gateway.streams.sse import EventStreamResponse
from spindle.shared.contracts.errors import Forbidden, InvalidRequest

router = APIRouter(tags=["messages"])

SSE_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {
        "description": (
            "text/event-stream: one unnamed event per message, `id: <seq>` then "
            "`data: <CompactMessage JSON>`; `: keep-alive` comments when idle; the "
            "response ends after the message that ends the conversation"
        ),
        "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}},
    },
    400: {
        "description": "Last-Event-ID / lastEventId / after is not a sequence number, or is "
        "beyond the run's end (problem+json, rule CURSOR_BEYOND_END with lastSeq)"
    },
    410: {
        "description": "the cursor is older than what is kept (problem+json, rule "
        "CURSOR_EXPIRED with oldestSeq; docs/streaming/gap-free.md)"
    },
    204: {"description": "the conversation ended at the client's cursor"},
    401: {"description": "missing, invalid or expired credentials (problem+json)"},
    404: {"description": "unknown run (problem+json)"},
    429: {"description": "the tenant holds its maximum of open streams (problem+json)"},
    503: {"description": "the live feed is unavailable; retry (problem+json)"},
}


def _event_id(value: str | None, source: str) -> int | None:
    if value is None or value.strip() == "":
        return None
    try:
        seq = int(value.strip())
    except ValueError:
        raise InvalidRequest(
            f"{source} must be a message sequence number",
            errors=[{"field": source, "rule": "int_parsing", "message": f"got {value!r}"}],
        ) from None
    if seq < 0:
        raise InvalidRequest(f"{source} must not be negative")
    return seq


@router.get(
    "/runs/{workflow_id}/{run_id}/stream",
    summary="Server-sent events: backlog after the cursor, then live messages",
    status_code=200,
    response_class=EventStreamResponse,  # type: ignore[arg-type]
    responses=SSE_RESPONSES,
)
async def stream_messages(
    workflow_id: str,
    run_id: str,
    request: Request,
    *,
    run: ReadableRunDep,
    caller: CallerDep,
    since: Annotated[
        int | None, Query(ge=0, description="replay stored messages with ts > since (epoch ms)")
    ] = None,
    skip_history: Annotated[
        bool,
        Query(
            alias="skipHistory",
            description="without since/Last-Event-ID: live messages only",
        ),
    ] = False,
    last_event_id_query: Annotated[
        str | None,
        Query(alias="lastEventId", description="for clients that cannot set Last-Event-ID"),
    ] = None,
    after: Annotated[
        str | None,
        Query(description="resume after this seq (the same cursor as Last-Event-ID)"),
    ] = None,
    access_token: Annotated[
        str | None,
        Query(description="stream token or API key/JWT (EventSource cannot send headers)"),
    ] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventStreamResponse:
    # EventSource's own Last-Event-ID (a reconnect) wins over the URL's cursor.
    after_seq = _event_id(last_event_id, "Last-Event-ID")
    if after_seq is None:
        after_seq = _event_id(last_event_id_query, "lastEventId")
    if after_seq is None:
        after_seq = _event_id(after, "after")
    follow = RunFollow(
        workflow_id=workflow_id, after_seq=after_seq, since_ts=since, live_only=skip_history
    )
    # The stream holds a slot and settles a run closed outside Spindle when idle.
    stream = await open_run_events(caller, follow)
    # Ended with a retry hint when this process stops (spindle.gateway.http.stream_drain).
    return EventStreamResponse(stream, drain=caller.state.stream_drain)


class StreamToken(BaseModel):
    """A short-lived, read-only token for one run's stream."""

    access_token: str
    expires_at: datetime
    stream_url: str


@router.post(
    "/runs/{workflow_id}/stream-token",
    response_model=StreamToken,
    summary="A signed stream token for browsers (one run, read-only, expires soon)",
    responses={
        401: {"description": "missing or invalid credentials (problem+json)"},
        403: {"description": "a stream token cannot mint another (problem+json)"},
        404: {"description": "unknown run (problem+json)"},
    },
)
async def create_stream_token(
    workflow_id: str,
    request: Request,
    *,
    run: ReadableRunDep,
    identity: IdentityDep,
    base_url: BaseUrlDep,
    bus: BusDep,
) -> StreamToken:
    if identity.method == "stream_token":
        raise Forbidden("a stream token cannot mint another one")
    authenticator = gateway_state(request).authenticator
    token, expires = authenticator.stream_tokens.issue(identity, workflow_id)
    meta = await bus.get_meta(workflow_id)
    run_id = meta.get("run_id") or "latest"
    return StreamToken(
        access_token=token,
        expires_at=datetime.fromtimestamp(expires, UTC),
        stream_url=f"{base_url}/runs/{workflow_id}/{run_id}/stream?access_token={token}",
    )
