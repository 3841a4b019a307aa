"""A loop a process runs beside its real work (archive catch-up, push delivery, ...).

Subclasses give the loop a ``name`` and write ``run()``: it loops until
cancelled. ``start()`` is idempotent; ``stop()`` cancels and waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod


class BackgroundLoop(ABC):
    """One named asyncio task per instance, started and stopped with its owner."""

    name = "background loop"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @abstractmethod
    async def run(self) -> None:
        """Loop until cancelled."""
