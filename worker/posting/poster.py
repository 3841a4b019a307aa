"""Posting a run's messages from inside an activity, idempotently.

Every post carries a dedup key made of the run, the activity id and the index
of the post within this activity execution. A retried attempt re-posts the same
messages under the same keys, so the bus stores each only once; the retry
announces itself first with one RESTARTING message per attempt.

A message larger than ``Settings.max_message_bytes`` is cut to fit (its text
ends with "… [truncated N bytes]") rather than failing the node. Archiving the
posted messages never fails the node either: what MongoDB cannot take now waits
in the archive outbox (``spindle.worker.archive``) until it can.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any, NoReturn

from temporalio import activity

from spindle.shared.bus.message_bus import Fence, PostResult, StoredMessage, stream_key
from spindle.shared.contracts.errors import AttemptSuperseded, to_application_error
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message, cut_to_size
from spindle.shared.platform.telemetry import current_trace_ids
from spindle.worker.archive.operations import SaveMessages
from spindle.worker.archive.writes import archive_write
from spindle.worker.contracts import RunRef

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript

    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive
    from spindle.worker.archive.outbox import ArchiveOutbox

logger = logging.getLogger(__name__)

# Claim attempt ARGV[1] of an activity execution unless a newer one has: returns
# the highest attempt that has claimed it (ARGV[1] itself when this one is current).
FENCE_SCRIPT = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local attempt = tonumber(ARGV[1])
if current > attempt then
  return current
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return attempt
"""
# Attempts overlap at most for a node's start-to-close timeout (at most a day).
FENCE_TTL_SECONDS = 2 * 86_400


_FENCE_SCRIPTS: weakref.WeakKeyDictionary[MessageBus, AsyncScript] = weakref.WeakKeyDictionary()


def _fence_script(bus: MessageBus) -> AsyncScript:
    """The fence script of ``bus``, registered once (registering hashes the script)."""
    script = _FENCE_SCRIPTS.get(bus)
    if script is None:
        script = _FENCE_SCRIPTS[bus] = bus.redis.register_script(FENCE_SCRIPT)
    return script


def fence_key(stream_id: str, workflow_id: str, run_id: str, activity_id: str) -> str:
    """The Redis key of one activity execution's fencing token (the run's hash tag)."""
    return stream_key(stream_id, f"fence:{workflow_id}:{run_id}:{activity_id}")


class MessagePoster:
    """Posts messages of one activity execution to its run's stream.

    Args:
        bus: the Redis message bus.
        run: which run (stream, workstream) to post to.
        archive: where ``archive()`` saves the posted messages (None: nowhere).
        activity_id: default: the current activity's id.
        attempt: default: the current activity's attempt.
        outbox: where messages MongoDB cannot take wait; default: the outbox
            attached to ``archive``.
        max_message_bytes: longest stored message; the activity classes pass
            ``Settings.max_message_bytes``.
    """

    def __init__(
        self,
        bus: MessageBus,
        run: RunRef,
        *,
        archive: RunArchive | None = None,
        activity_id: str | None = None,
        attempt: int | None = None,
        outbox: ArchiveOutbox | None = None,
        max_message_bytes: int,
    ) -> None:
        info = activity.info() if activity.in_activity() else None
        self.bus = bus
        self.run = run
        self._archive = archive
        self._outbox = outbox
        self.max_message_bytes = max_message_bytes
        self.activity_id = activity_id or (info.activity_id if info else "local")
        self.attempt = attempt or (info.attempt if info else 1)
        self._index = 0
        self._announced = False
        # Only a remote activity can be retried while an older attempt still runs
        # (a local activity's retries are the same worker's, one after the other).
        self._fence: str | None = None
        if info is not None and not info.is_local:
            self._fence = fence_key(
                run.stream_id,
                info.workflow_id or run.workflow_id,
                info.workflow_run_id or run.run_id,
                info.activity_id,
            )
        self._claimed = False
        self.stored: list[StoredMessage] = []
        self.results: list[PostResult] = []

    def _key(self, suffix: str) -> str:
        return f"{self.run.workflow_id}:{self.run.run_id}:{self.activity_id}:{suffix}"

    def dedup_key(self, suffix: str) -> str:
        """A dedup key in this activity's namespace (``suffix``: not a bare index)."""
        return self._key(suffix)

    @property
    def next_post_key(self) -> str:
        """The dedup key the next ``post`` will use."""
        return self._key(str(self._index))

    async def check_current(self) -> None:
        """Claim this attempt as the activity's latest, or stop if a newer one has.

        Raises:
            ApplicationError: ``AttemptSuperseded`` (non-retryable; Temporal
                ignores the outcome of an attempt it has already retried).
        """
        if self._fence is None:
            return
        script = _fence_script(self.bus)
        latest = int(await script(keys=[self._fence], args=[self.attempt, FENCE_TTL_SECONDS]))
        self._claimed = True
        if latest > self.attempt:
            self._refuse(latest)

    def _refuse(self, latest: int) -> NoReturn:
        logger.warning(
            "attempt %d of %s was superseded by attempt %d: its results are refused (%s)",
            self.attempt,
            self.activity_id,
            latest,
            self.run.stream_id,
        )
        raise to_application_error(
            AttemptSuperseded(
                f"attempt {self.attempt} of {self.activity_id} was superseded by attempt {latest}",
                context={"activity_id": self.activity_id, "attempt": self.attempt},
            )
        )

    async def announce_retry(self, what: str) -> None:
        """On attempt > 1, claim this attempt (``check_current``) and post
        RESTARTING once ("retrying <what> (attempt n)").

        The first attempt has no older one to fence off: it claims with its first
        post or archive write (each checks first), one Redis round trip less a node.
        """
        if self.attempt <= 1:
            return
        if not self._claimed:
            await self.check_current()
        if self._announced:
            return
        self._announced = True
        await self._post(
            AgentMessageType.RESTARTING,
            f"retrying {what} (attempt {self.attempt})",
            details={"attempt": self.attempt},
            final=None,
            dedup_key=self._key(f"restart:{self.attempt}"),
        )

    async def post(
        self,
        type: AgentMessageType,
        text: str | None = None,
        *,
        details: Any = None,
        final: bool | None = None,
    ) -> PostResult:
        """Post one message; the same call on a retried attempt is a no-op."""
        if not self._announced and self.attempt > 1:
            await self.announce_retry(self.activity_id)
        key = self._key(str(self._index))
        self._index += 1
        return await self._post(type, text, details=details, final=final, dedup_key=key)

    async def _post(
        self,
        type: AgentMessageType,
        text: str | None,
        *,
        details: Any,
        final: bool | None,
        dedup_key: str,
    ) -> PostResult:
        if self.attempt > 1 and (details is None or isinstance(details, dict)):
            details = {**(details or {}), "attempt": self.attempt}
        message = create_compact_message(
            type,
            text,
            workstream_id=self.run.workstream_id,
            details=details,
            final=final,
            activity_id=self.activity_id,
        )
        fitted = cut_to_size(message, self.max_message_bytes)
        if fitted is not message:
            logger.warning(
                "%s from %s in %s was cut to %d bytes",
                type.name,
                self.activity_id,
                self.run.stream_id,
                self.max_message_bytes,
            )
        # Every post checks and claims the fence in the same script: an attempt a
        # newer one has superseded posts nothing more.
        fence = None if self._fence is None else Fence(self._fence, self.attempt, FENCE_TTL_SECONDS)
        result = await self.bus.post(self.run.stream_id, fitted, dedup_key=dedup_key, fence=fence)
        if result.superseded:
            self._refuse(result.superseded)
        self._claimed = True
        self.results.append(result)
        if result.closed:
            logger.warning(
                "stream %s has ended; dropped %s from %s",
                self.run.stream_id,
                type.name,
                self.activity_id,
            )
        elif result.raw:
            self.stored.append(StoredMessage(result.seq, result.ts, result.raw))
        return result

    async def archive(self) -> None:
        """Save the stored messages to the archive, now or (MongoDB down) through
        the outbox; never raises."""
        op = self.archive_op()
        if op is None:
            return
        await self.check_current()
        await archive_write(self._archive, op, outbox=self._outbox)

    def archive_op(self) -> SaveMessages | None:
        """The archive operation of the stored messages (None: nothing to save).

        The caller checks first that this attempt is still current (``check_current``).
        """
        if self._archive is None or not self.stored:
            return None
        # The activity's span posted them: archived messages name their trace.
        return SaveMessages.of(self.run.stream_id, list(self.stored), trace_ids=current_trace_ids())
