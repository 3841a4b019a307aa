"""Following a run for a caller: the stream slot it holds and what it reads.

Every door that streams — REST's SSE stream, AG-UI, A2A's streaming methods,
MCP's session stream and ``tools/call``, JSON-RPC's streaming ``tasks.execute``
— takes its caller's stream slot here (``take_slot``, ``hold_slot``), one of
the tenant's ``max_streams_per_tenant``: over the cap it raises ``RateLimited``
(429 / -32005, Retry-After), without Redis ``Unavailable``. What following a
run reads is built here too: its messages (Redis, then the archive when this
gateway keeps one: a cold resume) and the check that settles a run Temporal
closed without Spindle (``spindle.shared.temporal.closed_runs``). Each door
keeps its own format (SSE frames, AG-UI or A2A events, MCP progress, task
events); see docs/streaming/gap-free.md for the follow itself.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from spindle.gateway.limits.tenant_limits import StreamLease
from spindle.gateway.services.callers import Caller
from spindle.gateway.streams import resume
from spindle.gateway.streams.follower import Sequenced, StreamCursor, StreamFollower
from spindle.gateway.streams.run_messages import RunMessages, store_reader
from spindle.gateway.streams.sse import RunEventStream
from spindle.shared.temporal.closed_runs import ClosedRun, reconcile_closed_run


class RunFollow(BaseModel):
    """Which run to follow, and from where.

    Attributes:
        workflow_id: the run (its stream id).
        after_seq: resume after this message (``Last-Event-ID``); wins over ``since_ts``.
        since_ts: only messages with a newer ``ts`` (epoch ms).
        live_only: with neither cursor, only what is posted from now on.
    """

    model_config = ConfigDict(frozen=True)

    workflow_id: str = Field(min_length=1)
    after_seq: int | None = Field(None, ge=0)
    since_ts: int | None = None
    live_only: bool = False

    def cursor(self) -> StreamCursor:
        return StreamCursor(
            after_seq=self.after_seq, since_ts=self.since_ts, live_only=self.live_only
        )


async def take_slot(caller: Caller) -> StreamLease:
    """One of the caller's tenant's stream slots, held until released.

    Raises:
        RateLimited: the tenant holds ``max_streams_per_tenant`` open streams.
        Unavailable: Redis cannot be reached.
    """
    return await caller.limits.open_stream(caller.tenant_id)


def serve_under(caller: Caller, response: Response, lease: StreamLease) -> Response:
    """``response`` served under ``lease``: refreshed while it runs, released when it ends."""
    return caller.limits.holding(response, lease)


async def hold_slot(caller: Caller, response: Response) -> Response:
    """``response`` served under a slot taken now (``take_slot``, then ``serve_under``).

    Raises:
        RateLimited, Unavailable: as ``take_slot`` (nothing is served).
    """
    return serve_under(caller, response, await take_slot(caller))


def run_messages(caller: Caller, workflow_id: str) -> RunMessages:
    """The run's messages: Redis, then the archive for older ones when it is kept."""
    state = caller.state
    return RunMessages.of(workflow_id, bus=state.bus, archive=state.archive_if_enabled())


def run_follower(caller: Caller, follow: RunFollow, *, keepalive: bool = False) -> StreamFollower:
    """A follower of the run that re-joins a broken live feed (AG-UI, A2A, MCP).

    Args:
        keepalive: hand out an empty batch after each keep-alive interval idle.
    """
    state = caller.state
    return StreamFollower(
        run_messages(caller, follow.workflow_id),
        hub=state.hub,
        cursor=follow.cursor(),
        idle_seconds=state.settings.sse_keepalive_seconds if keepalive else None,
        resubscribe=True,
    )


async def messages_after(
    caller: Caller, workflow_id: str, seq: int
) -> AsyncGenerator[Sequenced, None]:
    """The run's messages after ``seq`` (0: from the first), live or from the archive,
    each once, until the run's end: the shared resume of every cursor-based stream
    (MCP task streams; docs/streaming/gap-free.md#one-cursor-on-every-protocol).

    The caller checks read access to the run first.

    Raises:
        CursorExpired: the messages right after ``seq`` are no longer kept
            (``data()`` names ``oldestSeq``).
        CursorBeyondEnd: the run never reached ``seq`` (``data()`` names ``lastSeq``).
    """
    state = caller.state
    async for message in resume.messages_after(
        workflow_id, seq, bus=state.bus, hub=state.hub, archive=state.archive_if_enabled()
    ):
        yield message


async def check_closed(caller: Caller, workflow_id: str) -> ClosedRun | None:
    """Settle the run if Temporal closed it without Spindle (posts its closing message).

    A run closed from outside posts nothing by itself: a follower asks this when
    idle, so that its stream ends rather than sending keep-alives forever.
    """
    state = caller.state
    return await reconcile_closed_run(
        workflow_id,
        temporal=state.temporal,
        bus=state.bus,
        archive=state.archive_if_enabled(),
        on_closed=state.on_run_closed,
    )


async def open_run_events(caller: Caller, follow: RunFollow) -> RunEventStream:
    """The run's SSE stream (REST), under a stream slot taken now.

    Raises:
        RateLimited, Unavailable: as ``take_slot``.
    """
    state, workflow_id = caller.state, follow.workflow_id

    async def closed_check() -> ClosedRun | None:
        return await check_closed(caller, workflow_id)

    lease = await take_slot(caller)
    return RunEventStream(
        workflow_id,
        hub=state.hub,
        bus=state.bus,
        read_backlog=store_reader(workflow_id, state.bus, state.archive_if_enabled()),
        cursor=follow.cursor(),
        keepalive_seconds=state.settings.sse_keepalive_seconds,
        lease=lease,
        on_idle=closed_check,
        idle_every=state.settings.sse_closed_check_keepalives,
        archive=state.archive_if_enabled(),
    )
