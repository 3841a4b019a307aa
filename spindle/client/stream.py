"""A run's messages, with seed 002's two-phase strategy and reconnection.

Phase 1 fetches the stored history in one gzip response
(``GET …/updates``); phase 2 opens the SSE stream for what comes next
(``GET …/stream?skipHistory=true&since=<ts of the last history message>``).
The gateway's ``since`` replays every stored message newer than the history,
so a message posted between the two phases arrives in phase 2, once. Every
message's ``ts`` strictly increases per run and every SSE event carries the
message's ``seq``: the stream keeps a message only if it is newer than the
last one kept by both, which drops any message a reconnection sends again.

A broken connection (the gateway restarted, a network cut, a 429/503) is
retried with exponential backoff (``BackoffPolicy``), resuming with
``Last-Event-ID: <last seq>``; the attempt counter restarts once a connection
delivers something. The stream ends after the main workstream's COMPLETE or
TERMINATED, or when the gateway answers 204 (the conversation ended before the
cursor).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from spindle.client.backoff import BackoffPolicy, Random, Reconnects, Sleep
from spindle.client.errors import (
    RETRYABLE_STATUSES,
    ApiError,
    ConnectionFailed,
    StreamDisconnected,
    api_error,
)
from spindle.client.models import StreamedMessage
from spindle.client.sse import SseDecoder
from spindle.shared.contracts.messages import parse_message

log = logging.getLogger(__name__)

AfterHistory = Callable[[list[StreamedMessage]], Awaitable[None]]


def run_path(workflow_id: str, run_id: str, leaf: str) -> str:
    """``/runs/{workflowId}/{runId}/{leaf}`` with both ids escaped."""
    return f"/runs/{quote(workflow_id, safe='')}/{quote(run_id, safe='')}/{leaf}"


class MessageCursor:
    """Where a reader of one run's messages stands; keeps each message once.

    Attributes:
        last_seq: the seq of the newest message kept that had one (0: none yet).
        last_ts: the ``ts`` of the newest message kept (None: none yet).
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.last_seq = 0
        self.last_ts: int | None = None

    def accept(
        self, data: str | bytes | dict[str, Any], *, seq: int | None, replayed: bool
    ) -> StreamedMessage | None:
        """The message if it is newer than the cursor (by seq and ts), else None.

        A kept message moves the cursor; a malformed one is logged and skipped.
        """
        try:
            compact = parse_message(data)
        except ValueError as exc:
            log.warning("skipped a malformed message of run %s: %s", self.run_id, exc)
            return None
        if seq is not None and seq <= self.last_seq:
            return None
        if compact.ts is not None and self.last_ts is not None and compact.ts <= self.last_ts:
            return None
        if seq is not None:
            self.last_seq = seq
        if compact.ts is not None:
            self.last_ts = compact.ts
        return StreamedMessage.of(compact, self.run_id, seq=seq, replayed=replayed)


class MessageStream:
    """The messages of one run, history first, then live; iterate it once.

    Args:
        http: the SDK's HTTP client (base URL and credentials set).
        workflow_id: the run's workflow id.
        run_id: the run id (any value addresses the run's stream).
        policy: reconnection delays and attempts.
        read_timeout: seconds of silence after which a connection counts as broken.
        after_history: awaited once phase 1 is done and before phase 2 connects,
            with the history's messages (e.g. to render them all at once).
        sleep: replaces ``asyncio.sleep`` for backoff waits (tests).
        rand: replaces ``random.random`` for jitter (tests).

    Attributes:
        cursor: the newest message yielded (``last_seq``, ``last_ts``).
        ended: True once the conversation's last message was yielded.
        reconnects: the backoff state (attempts, delays waited).
        connections: how many SSE connections were opened (phase 2).
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        workflow_id: str,
        run_id: str,
        *,
        policy: BackoffPolicy | None = None,
        read_timeout: float = 60.0,
        after_history: AfterHistory | None = None,
        sleep: Sleep | None = None,
        rand: Random | None = None,
    ) -> None:
        self._http = http
        self.workflow_id = workflow_id
        self.run_id = run_id
        self._read_timeout = read_timeout
        self._after_history = after_history
        self.reconnects = Reconnects(policy or BackoffPolicy(), sleep=sleep, rand=rand)
        self.cursor = MessageCursor(run_id)
        self.ended = False
        self.connections = 0

    def __aiter__(self) -> AsyncIterator[StreamedMessage]:
        return self.messages()

    async def messages(self) -> AsyncIterator[StreamedMessage]:
        """Yield every message of the run once, in order, until the conversation ends.

        Raises:
            ApiError: the gateway refused the request (401, 403, 404, …).
            StreamDisconnected: the connection broke and no reconnection succeeded.
        """
        history = await self._history()
        for message in history:
            yield message
            if message.ends_conversation:
                self.ended = True
                return
        if self._after_history is not None:
            await self._after_history(history)
        while not self.ended:
            try:
                async for message in self._live():
                    yield message
                if self.ended:
                    return
                cause: Exception = ConnectionFailed("the gateway closed the stream")
                at_least = None
            except (httpx.TransportError, ApiError) as exc:
                cause, at_least = self._retryable(exc)
            await self._backoff(cause, at_least)

    async def _history(self) -> list[StreamedMessage]:
        """Phase 1: the stored messages, gzip JSON, retried like the stream."""
        path = run_path(self.workflow_id, self.run_id, "updates")
        while True:
            try:
                reply = await self._http.get(path, headers={"Accept-Encoding": "gzip"})
                if reply.status_code >= 400:
                    raise api_error(reply.status_code, reply.content, reply.headers)
                raw = orjson.loads(reply.content)
                break
            except (httpx.TransportError, ApiError) as exc:
                cause, at_least = self._retryable(exc)
                await self._backoff(cause, at_least)
        self.reconnects.reset()
        kept = []
        for item in raw.get("messages", []):
            message = self.cursor.accept(item, seq=None, replayed=True)
            if message is not None:
                kept.append(message)
        return kept

    async def _live(self) -> AsyncIterator[StreamedMessage]:
        """Phase 2, one connection: stored messages after the cursor, then live ones."""
        params = {"skipHistory": "true", "since": str(self.cursor.last_ts or 0)}
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.cursor.last_seq:
            headers["Last-Event-ID"] = str(self.cursor.last_seq)
        timeout = httpx.Timeout(self._http.timeout.connect or 10.0, read=self._read_timeout)
        path = run_path(self.workflow_id, self.run_id, "stream")
        self.connections += 1
        async with self._http.stream(
            "GET", path, params=params, headers=headers, timeout=timeout
        ) as reply:
            if reply.status_code == 204:
                self.ended = True
                return
            if reply.status_code >= 400:
                raise api_error(reply.status_code, await reply.aread(), reply.headers)
            decoder = SseDecoder()
            async for line in reply.aiter_lines():
                event = decoder.line(line)
                if event is None:
                    if decoder.comments and self.reconnects.attempts:
                        self.reconnects.reset()  # a keep-alive: the connection is healthy
                    continue
                self.reconnects.reset()
                seq = int(event.id) if event.id and event.id.isdigit() else None
                message = self.cursor.accept(event.data, seq=seq, replayed=False)
                if message is None:
                    continue
                yield message
                if message.ends_conversation:
                    self.ended = True
                    return

    def _retryable(self, exc: Exception) -> tuple[Exception, float | None]:
        """``(cause, Retry-After)`` for an error worth retrying; re-raise any other."""
        if isinstance(exc, ApiError):
            if exc.status not in RETRYABLE_STATUSES:
                raise exc
            return exc, exc.retry_after
        return exc, None

    async def _backoff(self, cause: Exception, at_least: float | None) -> None:
        if self.reconnects.exhausted:
            raise StreamDisconnected(
                f"stream of run '{self.workflow_id}' lost after "
                f"{self.reconnects.attempts} reconnection attempts: {cause}",
                attempts=self.reconnects.attempts,
            ) from cause
        log.info("stream of %s broke (%s); reconnecting", self.workflow_id, cause)
        await self.reconnects.wait(at_least)
