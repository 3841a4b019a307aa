"""The one way tests wait for something another process or task does: poll a
probe until it holds, with a deadline (never a bare sleep in place of an event)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T] | T],
    *,
    what: str,
    timeout: float = 15.0,
    interval: float = 0.02,
    alive: Callable[[], bool] | None = None,
) -> T:
    """Call ``probe`` (sync or async) until it returns something truthy; return it.

    Args:
        probe: what to check; a falsy result means "not yet".
        what: named in the error when the deadline passes.
        timeout: seconds until the deadline.
        interval: seconds between probes.
        alive: if given and it turns false, fail at once (the awaited party died).

    Raises:
        AssertionError: the deadline passed, or ``alive`` turned false.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value: Any = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[no-any-return]
        if alive is not None and not alive():
            raise AssertionError(f"{what}: gave up, the awaited party is gone")
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not seen within {timeout}s")
        await asyncio.sleep(interval)  # the poll interval, bounded by the deadline
