"""Batching streamed LLM tokens into STREAMING_CHUNK texts (seed 002, docs/design.md §3).

Tokens are collected in a buffer that is cut into a chunk when either

- ``interval`` seconds have passed since the oldest token still in the buffer
  arrived (16 ms by default), or
- the buffer holds ``max_chars`` characters (200 by default): the chunk is the
  first ``max_chars`` characters exactly, the rest stays buffered,

whichever comes first. A fast stream is thus cut into full 200-character chunks
plus what a 16 ms window collects; a slow one (a token every > 16 ms) into one
chunk per token, each at most 16 ms late.

At the end of the stream ``finish`` gives the last chunk (the one a client sees
with ``f: 1``). When nothing was cut before the end, the whole reply came within
one window and ``finish`` gives None: the final THOUGHT/ANSWER follows at once
and a chunk would only repeat it.

The batcher is pure state: it reads time only from the injected ``clock`` (a
monotonic clock in seconds), so tests drive it without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_INTERVAL = 0.016
DEFAULT_MAX_CHARS = 200


class ChunkBatcher:
    """Collects tokens and cuts them into chunk texts.

    Args:
        interval: seconds a token may wait in the buffer (> 0).
        max_chars: most characters of one chunk (>= 1).
        clock: monotonic time in seconds; default ``time.monotonic``.
    """

    def __init__(
        self,
        *,
        interval: float = DEFAULT_INTERVAL,
        max_chars: int = DEFAULT_MAX_CHARS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        if max_chars < 1:
            raise ValueError("max_chars must be at least 1")
        self.interval = interval
        self.max_chars = max_chars
        self.clock = clock
        self._buffer: list[str] = []
        self._buffered = 0
        self._since: float | None = None  # arrival of the oldest buffered token
        self.cut = 0  # chunks handed out so far (``finish`` included)

    @property
    def pending(self) -> str:
        """The buffered text not yet handed out."""
        return "".join(self._buffer)

    def add(self, text: str) -> list[str]:
        """Buffer one token; returns the chunks now due (often none)."""
        if not text:
            return []
        now = self.clock()
        out = self.due()
        self._buffer.append(text)
        self._buffered += len(text)
        if self._since is None:
            self._since = now
        while self._buffered >= self.max_chars:
            joined = "".join(self._buffer)
            out.append(joined[: self.max_chars])
            rest = joined[self.max_chars :]
            self._buffer = [rest] if rest else []
            self._buffered = len(rest)
            # The rest arrived with the token just added: its window starts now.
            self._since = now if rest else None
            self.cut += 1
        return out

    def deadline(self) -> float | None:
        """Clock time at which the buffer is due, None when it is empty."""
        return None if self._since is None else self._since + self.interval

    def due(self) -> list[str]:
        """The buffer as one chunk if its window has passed, else nothing."""
        deadline = self.deadline()
        if deadline is None or self.clock() < deadline:
            return []
        text = self._take()
        self.cut += 1
        return [text]

    def finish(self) -> str | None:
        """The last chunk of the stream ("" when the buffer is empty), or None
        when no chunk was cut at all (see the module docstring)."""
        if self.cut == 0:
            self._take()
            return None
        self.cut += 1
        return self._take()

    def _take(self) -> str:
        text = "".join(self._buffer)
        self._buffer = []
        self._buffered = 0
        self._since = None
        return text
