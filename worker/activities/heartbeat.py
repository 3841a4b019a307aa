"""Heartbeating while an activity awaits something slow (an LLM, a tool)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity

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
        while True:
            activity.heartbeat(*details)
            await asyncio.sleep(interval)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
