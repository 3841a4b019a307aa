"""A loop a process runs beside its real work (archive catch-up, push delivery, ...).

Subclasses give the loop a ``name`` and write ``run()``: it loops until
cancelled, calling ``stop_if_cancelled()`` at the head of each pass. ``start()``
is idempotent; ``stop()`` cancels and waits for it.

Why the check: a cancel can arrive while a library call is under way and come
back as an ordinary error, or as a timeout the loop suppresses (``wait_for`` on
3.11 can swallow it). The loop would then go on with its task marked cancelling
and ``stop()`` would never return; this was seen in
tests/faults/test_archive_outbox.py, about one run in three. ``stop()`` also
cancels again while it waits, for a pass that swallowed the cancel and is
blocked inside its work.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod

logger = logging.getLogger(__name__)

# How long stop() waits for the task before cancelling it again.
RECANCEL_SECONDS = 1.0


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
        if task is None:
            return
        task.cancel()
        while True:
            done, _ = await asyncio.wait({task}, timeout=RECANCEL_SECONDS)
            if done:
                break
            logger.warning("%s did not stop when cancelled: cancelling it again", self.name)
            task.cancel()
        if not task.cancelled():
            task.result()  # a loop that died of an error says so to its owner

    @staticmethod
    def stop_if_cancelled() -> None:
        """Raise the cancel that ``stop()`` requested if something swallowed it."""
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError

    @abstractmethod
    async def run(self) -> None:
        """Loop until cancelled, calling ``stop_if_cancelled()`` on each pass."""
