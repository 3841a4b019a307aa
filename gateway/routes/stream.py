"""Phase 2 of seed 002's two-phase streaming: the run's messages over SSE.

See ``gateway.event_stream`` for the no-gap/no-duplicate protocol. The token
of browser clients arrives in ``access_token`` (EventSource cannot send
headers); it is accepted here and masked in the access log.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query

from gateway.deps import ArchiveDep, BusDep, HubDep, SettingsDep, TemporalDep
from gateway.event_stream import EventStreamResponse, RunEventStream, StreamCursor
from gateway.message_history import stored_messages
from gateway.run_lookup import ensure_run_exists
from shared.bus import StoredMessage
from shared.errors import InvalidRequest

router = APIRouter(tags=["messages"])

SSE_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {
        "description": (
            "text/event-stream: one unnamed event per message, `id: <seq>` then "
            "`data: <CompactMessage JSON>`; `: keep-alive` comments when idle; the "
            "response ends after the message that ends the conversation"
        ),
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    204: {"description": "the conversation ended before the client's cursor"},
    404: {"description": "unknown run (problem+json)"},
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
    *,
    bus: BusDep,
    hub: HubDep,
    archive: ArchiveDep,
    temporal: TemporalDep,
    settings: SettingsDep,
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
    access_token: Annotated[
        str | None, Query(description="stream token (EventSource cannot send headers)")
    ] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventStreamResponse:
    after_seq = _event_id(last_event_id, "Last-Event-ID")
    if after_seq is None:
        after_seq = _event_id(last_event_id_query, "lastEventId")
    await ensure_run_exists(workflow_id, bus=bus, archive=archive, temporal=temporal)
    archive_or_none = archive if settings.archive_enabled else None

    async def read_backlog(after: int, since_ts: int | None) -> list[StoredMessage]:
        return await stored_messages(
            workflow_id, bus=bus, archive=archive_or_none, after_seq=after, since_ts=since_ts
        )

    cursor = StreamCursor(after_seq=after_seq, since_ts=since, live_only=skip_history)
    stream = RunEventStream(
        workflow_id,
        hub=hub,
        bus=bus,
        read_backlog=read_backlog,
        cursor=cursor,
        keepalive_seconds=settings.sse_keepalive_seconds,
    )
    return EventStreamResponse(stream)
