"""Ending a stopping gateway's SSE streams, so their clients reconnect elsewhere.

An SSE stream never finishes on its own while its run is live. When the
gateway process is asked to stop (SIGTERM from Kubernetes, a rolling update),
``StreamDrain.begin()`` tells every open stream to end now: each writes a
``retry: <ms>`` field (the reconnection delay EventSource obeys) and finishes
its response cleanly, and the client reconnects with ``Last-Event-ID`` (to
another gateway: this one no longer accepts connections) and loses nothing.

The delay is drawn per stream between ``retry_ms`` and twice that, so the
clients of a gateway with many streams do not all land on the others at once.
"""

from __future__ import annotations

import asyncio
import random

# Ahead of the retry field: says why the stream ends, for people reading it raw.
GOODBYE_COMMENT = b": gateway shutting down; reconnect with Last-Event-ID\n"


class StreamDrain:
    """The process-wide "end your streams" notice of one gateway app.

    Args:
        retry_ms: least reconnection delay hinted to clients, in milliseconds.
    """

    def __init__(self, retry_ms: int) -> None:
        self._begun = asyncio.Event()
        self._retry_ms = retry_ms
        self._open = 0

    @property
    def draining(self) -> bool:
        """``begin()`` was called: streams end as soon as they see it."""
        return self._begun.is_set()

    @property
    def open_streams(self) -> int:
        """Streams between ``opened()`` and ``closed()``."""
        return self._open

    def opened(self) -> None:
        self._open += 1

    def closed(self) -> None:
        self._open -= 1

    def begin(self) -> int:
        """Ask every open stream (and any opened from now on) to end.

        Returns:
            how many streams were open.
        """
        self._begun.set()
        return self._open

    async def wait(self) -> None:
        """Return once ``begin()`` was called."""
        await self._begun.wait()

    def goodbye(self) -> bytes:
        """The last bytes of a drained stream: a comment and a jittered ``retry``."""
        delay = self._retry_ms + random.randint(0, self._retry_ms)  # spreading, not secrecy
        return GOODBYE_COMMENT + b"retry: %d\n\n" % delay
