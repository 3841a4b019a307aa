"""A durable outbox in Redis for archive writes (``ArchiveOutbox``).

The archiver that drains it is ``spindle.worker.archive.catch_up``; the
operations it holds are ``spindle.worker.archive.operations``.

In a worker (``ArchiveCatchUp`` running, ``ArchiveOutbox.queue_all``) every
archive write is queued here: a node's activity hands its report, NodeMessages
and messages over in one push and goes on, and the archiver writes what has
gathered (``LINGER_SECONDS``, at most ``BATCH_MAX_OPERATIONS``) as one bulk
command per collection, then pops the batch if it is still the one it read.
Counters of operations queued and written let a writer wait until its writes
are in MongoDB (``applied_through``: ``finish_run`` does, once per run).

Elsewhere (no archiver in the process) writes go to MongoDB directly, and to
the queue only when MongoDB fails. Runs never wait on MongoDB: when an archive
write fails because MongoDB is unreachable (or slower than ``write_timeout``),
the write is recorded as an operation in a Redis list and the run goes on. A
catch-up loop in every worker process replays the list in order, with backoff,
until MongoDB answers; a short Redis lock lets only one process drain at a time,
and an operation leaves the list only after MongoDB took it. Every operation is
idempotent (a message page is read each seq once and a report page each node
visit once, whether the same batch went again onto the same open page or onto
a new one; run updates are ``$set``), so replaying one that did reach MongoDB
before a crash is harmless. A batch's messages and node reports go on their
stream's and run's open page (``spindle.shared.store.open_pages``), whichever
process drains: the pages' states are in Redis beside the queue.

While the outbox holds anything, new writes queue behind it instead of going to
MongoDB directly: a run's updates are then applied in the order they were made
(a late ``paused`` never overwrites ``completed``), and a run does not pay the
write timeout again and again while MongoDB is down.

Keys (one hash tag, so the Lua scripts run on Redis Cluster), per archive
database, since workers of different databases may share a Redis::

    spindle:{archive-outbox:<db>}:queue   LIST of operations (JSON), oldest first
    spindle:{archive-outbox:<db>}:lock    STRING token of the process draining it
    spindle:{archive-outbox:<db>}:dead    LIST of operations MongoDB refused for good
    spindle:{archive-outbox:<db>}:queued  INT operations ever queued (a push's ticket)
    spindle:{archive-outbox:<db>}:done    INT operations ever popped (written or set aside)
    spindle:{archive-outbox:<db>}:page:m:<stream_id>, …:page:r:["<workflow_id>","<stream_id>"]
                                          STRING the open message page of a stream, report
                                          page of a run (``open_pages.PageState``), saved
                                          with the pop of the batch that wrote it; expires
                                          after PAGE_STATE_TTL_MILLISECONDS

Messages are queued with their stored bytes rather than as a seq range to read
back from Redis later: a run's Redis list is capped, and a chatty run would
have trimmed the oldest ones before a long outage ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING

from pydantic import ValidationError
from redis.exceptions import RedisError

from spindle.shared.store.archive import OpenPages, PageState, page_slots
from spindle.worker.archive.operations import ArchiveOperation, QueuedOp, is_transient

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient
    from spindle.shared.store.archive import ArchiveWrite, RunArchive

logger = logging.getLogger(__name__)

WRITE_TIMEOUT_SECONDS = 2.0
BATCH_MAX_OPERATIONS = 200
FLUSH_POLL_SECONDS = 0.005
# A reader waiting for other runs' writes (``caught_up``) polls less often.
CATCH_UP_POLL_SECONDS = 0.05
LOCK_MILLISECONDS = 15_000
# A stream or run that archives nothing for this long starts a new page next time
# (its open page's state expires): one small key per active stream and run.
PAGE_STATE_TTL_MILLISECONDS = 3_600_000

# KEYS[2] counts the operations that ever left the queue (see ``applied_through``).
_POP_IF_HEAD = """
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then
  redis.call('LPOP', KEYS[1])
  redis.call('INCR', KEYS[2])
  if KEYS[3] then redis.call('RPUSH', KEYS[3], ARGV[1]) end
  return 1
end
return 0
"""
# Pop the ARGV[3] oldest operations if they are still the ones read (first and
# last compared; entries are unique, and only the lock holder pops from the head),
# and save the states of the open pages they went on (KEYS[3..], ARGV[5..], for
# ARGV[4] ms).
_POP_BATCH = """
local n = tonumber(ARGV[3])
local first = redis.call('LINDEX', KEYS[1], 0)
if first == ARGV[1] and redis.call('LINDEX', KEYS[1], n - 1) == ARGV[2] then
  redis.call('LTRIM', KEYS[1], n, -1)
  redis.call('INCRBY', KEYS[2], n)
  for i = 3, #KEYS do
    redis.call('SET', KEYS[i], ARGV[i + 2], 'PX', ARGV[4])
  end
  return 1
end
return 0
"""
# Queue operations and count them; returns the ticket of the last one (how many
# were ever queued), which ``applied_through`` waits for.
_PUSH = """
redis.call('RPUSH', KEYS[1], unpack(ARGV))
return redis.call('INCRBY', KEYS[2], #ARGV)
"""
_REFRESH_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class ArchiveOutbox:
    """Archive writes that fall back to a Redis list when MongoDB fails.

    Args:
        redis: the bus's Redis client (``decode_responses=False``).
        database: the archive's database name (each database has its own outbox).
        write_timeout: seconds a direct write may take before it is queued instead.
    """

    def __init__(
        self,
        redis: RedisClient,
        database: str,
        *,
        write_timeout: float = WRITE_TIMEOUT_SECONDS,
    ) -> None:
        tag = f"spindle:{{archive-outbox:{database}}}"
        self.queue_key = f"{tag}:queue"
        self.lock_key = f"{tag}:lock"
        self.dead_key = f"{tag}:dead"
        self.queued_key = f"{tag}:queued"
        self.done_key = f"{tag}:done"
        self._page_key_prefix = f"{tag}:page:"
        self.write_timeout = write_timeout
        # True while an archiver drains this outbox in this process: writers
        # then queue every write (``enqueue``) instead of waiting for MongoDB.
        self.queue_all = False
        self._redis = redis
        self._push = redis.register_script(_PUSH)
        self._pop_batch = redis.register_script(_POP_BATCH)
        self._pop_if_head = redis.register_script(_POP_IF_HEAD)
        self._refresh_lock = redis.register_script(_REFRESH_LOCK)
        self._release_lock = redis.register_script(_RELEASE_LOCK)
        self.pushed = asyncio.Event()
        # Set by a writer that waits for the archive (``applied_through``): the
        # archiver stops gathering and writes at once.
        self.flush_wanted = asyncio.Event()

    async def write(self, archive: RunArchive, op: ArchiveOperation) -> bool:
        """Apply ``op`` to the archive now, or queue it for the catch-up loop.

        Never raises: a write that can be neither applied nor queued is logged.

        Returns:
            True when the archive took it now.
        """
        try:
            behind = await self.pending() > 0
        except (RedisError, OSError):
            behind = False  # cannot tell: try MongoDB, it may well answer
        if not behind:
            try:
                async with asyncio.timeout(self.write_timeout):
                    await op.apply(archive)
                return True
            except Exception as exc:
                if not is_transient(exc):
                    logger.warning("archive refused %s: %s", op.describe(), exc)
                    return False
                logger.warning(
                    "MongoDB unavailable (%s): %s queued for catch-up",
                    type(exc).__name__,
                    op.describe(),
                )
        try:
            await self.push(op)
        except Exception as exc:  # never fail a node over its archive
            logger.error("%s is lost: neither MongoDB nor Redis took it (%s)", op.describe(), exc)
        return False

    async def push(self, *ops: ArchiveOperation) -> int:
        """Queue operations behind the others, in one round trip.

        Returns:
            The last one's ticket (see ``applied_through``).
        """
        now = int(time.time() * 1000)
        entries = [QueuedOp(op=op, queued_at_ms=now).model_dump_json().encode() for op in ops]
        ticket = int(await self._push(keys=[self.queue_key, self.queued_key], args=entries))
        self.pushed.set()
        return ticket

    async def enqueue(self, archive: RunArchive, *ops: ArchiveOperation) -> int | None:
        """Queue operations for the archiver (one Redis round trip, no MongoDB
        wait); when Redis cannot take them, write them to MongoDB now instead.

        Never raises.

        Returns:
            The ticket of the last one, or None when they were not queued.
        """
        if not ops:
            return None
        try:
            return await self.push(*ops)
        except Exception as exc:
            logger.warning("archive outbox unavailable (%s): writing to MongoDB now", exc)
        for op in ops:
            await self.write(archive, op)
        return None

    async def applied_through(
        self, ticket: int, *, within: float, poll: float = FLUSH_POLL_SECONDS
    ) -> bool:
        """Wait until every operation queued up to ``ticket`` has left the queue
        (applied, or set aside as refused), at most ``within`` seconds.

        Args:
            ticket: what ``push`` returned (or the ``queued`` counter read earlier).
            within: seconds to wait at most.
            poll: seconds between two reads of the ``done`` counter.

        Returns:
            True when they have; False on timeout (they stay queued).
        """
        deadline = time.monotonic() + within
        self.flush_wanted.set()
        while True:
            try:
                done = int(await self._redis.get(self.done_key) or 0)
            except (RedisError, OSError):
                return False
            if done >= ticket:
                return True
            if time.monotonic() >= deadline:
                return False
            # Another process may hold the drain lock: Redis is the only common clock.
            await asyncio.sleep(poll)

    async def caught_up(self, *, within: float) -> bool:
        """Wait until everything any process has queued so far has left the queue, at
        most ``within`` seconds; True when it has (or Redis holds nothing queued).

        A reader that must see what other runs wrote (a recorded fork's lookup that
        missed, an evaluation comparing a run that has just ended) waits here: a
        worker lost while draining holds the queue for up to ``LOCK_MILLISECONDS``
        (docs/replay-and-compare.md#limits).
        """
        try:
            ticket = int(await self._redis.get(self.queued_key) or 0)
        except (RedisError, OSError):
            return False
        return await self.applied_through(ticket, within=within, poll=CATCH_UP_POLL_SECONDS)

    async def pending(self) -> int:
        """How many operations wait for MongoDB."""
        return int(await self._redis.llen(self.queue_key))

    async def dead_letters(self) -> list[QueuedOp]:
        """Operations MongoDB refused for good (kept for an operator to look at;
        entries that cannot even be read are skipped here)."""
        readable = []
        for raw in await self._redis.lrange(self.dead_key, 0, -1):
            with contextlib.suppress(ValidationError):
                readable.append(QueuedOp.model_validate_json(raw))
        return readable

    async def drain(self, archive: RunArchive) -> int:
        """Replay queued operations in order until the queue is empty.

        Does nothing when another process holds the drain lock.

        Returns:
            How many operations left the queue (applied, or set aside as
            refused for good).

        Raises:
            Exception: a transient MongoDB failure (the operation stays queued)
                or a Redis failure; the caller backs off and tries again.
        """
        token = uuid.uuid4().hex
        if not await self._redis.set(self.lock_key, token, nx=True, px=LOCK_MILLISECONDS):
            return 0
        applied = 0
        try:
            while True:
                raws = await self._redis.lrange(self.queue_key, 0, BATCH_MAX_OPERATIONS - 1)
                if not raws:
                    return applied
                taken = await self._apply_batch(archive, raws)
                if taken < 0:
                    return applied  # the lock was lost: the new holder goes on
                applied += taken
                await self._refresh_lock(keys=[self.lock_key], args=[token, LOCK_MILLISECONDS])
        finally:
            with contextlib.suppress(RedisError, OSError):
                await self._release_lock(keys=[self.lock_key], args=[token])

    async def _apply_batch(self, archive: RunArchive, raws: list[bytes | str]) -> int:
        """Apply queued operations in one bulk per collection, then pop them.

        An operation that cannot be read or built, or a bulk MongoDB refuses,
        sends the batch down the one-by-one path, which sets the culprit aside.

        Returns:
            How many left the queue; -1 when they were no longer at its head.
        """
        try:
            writes = [w for raw in raws for w in QueuedOp.model_validate_json(raw).op.writes()]
            pages = await self._open_pages(writes)
            async with asyncio.timeout(self.write_timeout):
                await archive.bulk_apply(writes, pages=pages)
        except Exception as exc:
            # Redis failing (reading the pages' states) is no fault of the batch.
            if is_transient(exc) or isinstance(exc, RedisError):
                raise
            for raw in raws:
                await self._replay(archive, raw)
            return len(raws)
        # The pages' new states are saved with the pop, in one script: a batch
        # that stays queued is planned again from the states before it.
        staged = list(pages.staged.items())
        popped = await self._pop_batch(
            keys=[self.queue_key, self.done_key, *(self.page_key(slot) for slot, _ in staged)],
            args=[
                raws[0],
                raws[-1],
                len(raws),
                PAGE_STATE_TTL_MILLISECONDS,
                *(state.dumps() for _, state in staged),
            ],
        )
        return len(raws) if popped else -1

    def page_key(self, slot: str) -> str:
        """The Redis key of an open page's state (``open_pages.PageState``)."""
        return self._page_key_prefix + slot

    async def _open_pages(self, writes: list[ArchiveWrite]) -> OpenPages:
        """The batch's plan onto the open pages, from their states in Redis."""
        slots = page_slots(writes)
        if not slots:
            return OpenPages()
        raws = await self._redis.mget([self.page_key(slot) for slot in slots])
        states = {slot: PageState.loads(raw) for slot, raw in zip(slots, raws, strict=True)}
        return OpenPages({slot: state for slot, state in states.items() if state is not None})

    async def _replay(self, archive: RunArchive, raw: bytes | str) -> None:
        try:
            entry = QueuedOp.model_validate_json(raw)
        except ValidationError as exc:
            logger.error("unreadable archive operation moved aside: %s", exc)
            await self._pop_if_head(keys=[self.queue_key, self.done_key, self.dead_key], args=[raw])
            return
        try:
            async with asyncio.timeout(self.write_timeout):
                await entry.op.apply(archive)
        except Exception as exc:
            if is_transient(exc):
                raise
            logger.error("archive refused %s for good: %s", entry.op.describe(), exc)
            await self._pop_if_head(keys=[self.queue_key, self.done_key, self.dead_key], args=[raw])
            return
        await self._pop_if_head(keys=[self.queue_key, self.done_key], args=[raw])
