"""Heartbeating while an activity awaits something slow (an LLM, a tool)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from temporalio import activity

logger = logging.getLogger(__name__)

_MIN_INTERVAL = 0.1


@contextlib.asynccontextmanager
async def heartbeating(*details: object) -> AsyncIterator[None]:
    """Heartbeat in the background for the duration of the block.

    The interval is a third of the activity's heartbeat timeout, so one missed
    beat is not fatal. Without a heartbeat timeout (nobody is watching), in a
    local activity (which cannot heartbeat) or outside an activity this does
    nothing.
    """
    info = activity.info() if activity.in_activity() else None
    if info is None or info.is_local or not info.heartbeat_timeout:
        yield
        return
    interval = max(info.heartbeat_timeout.total_seconds() / 3, _MIN_INTERVAL)

    async def beat() -> None:
        # The first beat after one interval, not at once: the heartbeat timeout
        # counts from the attempt's start, and a quick node (most of them) then
        # sends no heartbeat at all, one message to Temporal less per node.
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat(*details)

    task = asyncio.create_task(beat())
    try:
        yield
    except asyncio.CancelledError:
        # Also what a worker that froze past the heartbeat timeout hears when it
        # wakes up (Temporal no longer knows the attempt): say which one stopped.
        logger.info("attempt %d of %s was cancelled", info.attempt, info.activity_id)
        raise
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
