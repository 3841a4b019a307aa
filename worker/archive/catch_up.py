"""The archiver: one per worker process, draining the archive outbox into MongoDB.

While it runs, the process's writers queue every archive write
(``ArchiveOutbox.queue_all``) and it writes them in batches, backing off while
MongoDB (or Redis) is down (see ``spindle.worker.archive.outbox``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from spindle.shared.platform.background_loop import BackgroundLoop
from spindle.worker.archive.outbox import ArchiveOutbox
from spindle.worker.archive.writes import attach_outbox

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient
    from spindle.shared.store.archive import RunArchive

logger = logging.getLogger(__name__)

LOCKED_POLL_SECONDS = 0.02
# How long the archiver lets writes gather after the first one before it writes
# them as one batch (one bulk per collection): fewer, larger MongoDB commands.
# When each batch made a page, 50 ms gathered ~3 nodes of a quick chain (1.37
# documents a node) and 250 ms ~15 (1.15); pages now stay open across batches
# (docs/benchmarks.md). A writer that waits for its writes (finish_run) cuts it short.
LINGER_SECONDS = 0.25
IDLE_POLL_SECONDS = 1.0
BACKOFF_FIRST_SECONDS = 0.25
BACKOFF_MAX_SECONDS = 5.0


class ArchiveCatchUp(BackgroundLoop):
    """The archiver: drains an outbox into the archive in batches in the
    background, backing off while MongoDB (or Redis) is down. One per worker
    process; ``start``/``stop``. While it runs, the process's writers queue
    every archive write (``ArchiveOutbox.queue_all``)."""

    name = "archive catch-up"

    def __init__(
        self,
        outbox: ArchiveOutbox,
        archive: RunArchive,
        *,
        idle_seconds: float = IDLE_POLL_SECONDS,
        backoff_max_seconds: float = BACKOFF_MAX_SECONDS,
        linger_seconds: float = LINGER_SECONDS,
    ) -> None:
        self.outbox = outbox
        self.archive = archive
        self.idle_seconds = idle_seconds
        self.linger_seconds = linger_seconds
        self.backoff_max_seconds = backoff_max_seconds
        super().__init__()

    def start(self) -> None:
        """Start draining; from now on this process's writers queue every write."""
        super().start()
        self.outbox.queue_all = True

    async def stop(self) -> None:
        """Stop draining; writers go back to writing MongoDB directly."""
        self.outbox.queue_all = False
        await super().stop()

    async def run(self) -> None:
        """Loop until cancelled."""
        delay = BACKOFF_FIRST_SECONDS
        failing = False
        while True:
            self.stop_if_cancelled()
            # Cleared before the queue is read: a push from now on wakes the idle wait.
            self.outbox.pushed.clear()
            try:
                queued = await self.outbox.pending()
                applied = await self.outbox.drain(self.archive) if queued else 0
            except Exception as exc:
                if not failing:
                    logger.warning(
                        "archive catch-up waits for MongoDB or Redis: %s %s",
                        type(exc).__name__,
                        exc,
                    )
                    failing = True
                await asyncio.sleep(delay)  # backoff while a server is down
                delay = min(delay * 2, self.backoff_max_seconds)
                continue
            if failing:
                logger.info("archive catch-up: MongoDB and Redis answer again")
                failing = False
            delay = BACKOFF_FIRST_SECONDS
            if applied:
                logger.debug("archive: %d queued writes applied", applied)
            elif queued:
                # Another process holds the lock: look again soon, as it may
                # have read the queue before our writers' latest push.
                await asyncio.sleep(LOCKED_POLL_SECONDS)
            else:
                await self._idle()

    async def _idle(self) -> None:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the
        # cancellation that stops this loop at shutdown.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.idle_seconds):
                await self.outbox.pushed.wait()
        if not self.outbox.pushed.is_set() or not self.outbox.queue_all:
            return
        # Writes queued: let the ones behind gather into the same batch.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.linger_seconds):
                await self.outbox.flush_wanted.wait()
        self.outbox.flush_wanted.clear()


@contextlib.asynccontextmanager
async def archiver_running(
    archive: RunArchive, redis: RedisClient, database: str
) -> AsyncIterator[ArchiveCatchUp]:
    """An outbox attached to ``archive`` and its archiver draining it, as in a
    worker process (``run_worker``); detached and stopped on the way out."""
    outbox = ArchiveOutbox(redis, database)
    attach_outbox(archive, outbox)
    archiver = ArchiveCatchUp(outbox, archive)
    archiver.start()
    try:
        yield archiver
    finally:
        await archiver.stop()
        attach_outbox(archive, None)
