"""The Redis message bus: a capped list per run plus a pub/sub channel.

CONTRACT (keep these names and semantics):

Keys of one stream share the hash tag ``{stream_id}`` so the same code runs on
Redis Cluster::

    spindle:{<stream_id>}:log     LIST of stored messages, compact JSON bytes, ``ts`` first
    spindle:{<stream_id>}:seq     INT  last sequence number assigned (1-based)
    spindle:{<stream_id>}:lastts  INT  last ``ts`` assigned (epoch ms)
    spindle:{<stream_id>}:dedup   ZSET dedup key → seq (trimmed to the newest 10 000)
    spindle:{<stream_id>}:end     INT  seq of the message that ended the conversation
    spindle:{<stream_id>}:meta    HASH run metadata (run_id, tenant_id, graph, ...)
    channel spindle:{<stream_id>}:live

``post`` runs ONE Lua script that atomically: returns the existing seq if the
dedup key was seen (no append, no publish); refuses (closed=True) if ``end`` is
set; assigns ``seq = INCR seq``; assigns ``ts = max(now_ms_from_redis_TIME or the
message's own ts, lastts + 1)`` so ts strictly increases per stream; writes the
stored form ``{"ts":<ts>,...rest of compact JSON}``; RPUSH + LTRIM to
``max_messages`` + EXPIRE all keys to ``ttl_seconds``; sets ``end`` if the
message ends the conversation (COMPLETE/TERMINATED on workstream main); and
PUBLISHes ``b"<seq> <0|1 ends> <stored json>"`` on the live channel (SPUBLISH
on a Redis Cluster: the channel shares the keys' slot, so the script stays on
one node and the message reaches only that shard's subscribers).

The seq of list element k is ``seq_counter - LLEN + 1 + k`` (read both in one
MULTI), so stored entries are exactly the wire bytes and are served without
re-parsing. Because ``ts`` strictly increases with seq, ``since`` filtering is a
binary search reading only the ``ts`` prefix of O(log n) entries.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
from redis.exceptions import NoScriptError, RedisError

from spindle.shared.contracts.messages import CompactMessage
from spindle.shared.platform.redis_connect import RedisClient, connect_redis, publish_command

if TYPE_CHECKING:
    from spindle.shared.platform.settings import Settings

DEDUP_KEEP = 10_000
REDIS_POOL_SIZE = 64
KEY_PARTS = ("log", "seq", "lastts", "dedup", "end", "meta")


class StoredMessage(NamedTuple):
    """One message as stored: its per-stream sequence, timestamp and wire bytes."""

    seq: int
    ts: int
    raw: bytes


class PostResult(NamedTuple):
    """Outcome of a post. ``raw`` is the stored bytes (empty when closed).

    ``superseded``: a fenced post (``Fence``) refused because a newer attempt of
    its activity has claimed the fence: that attempt's number (else 0).
    """

    seq: int
    ts: int
    duplicate: bool
    closed: bool
    raw: bytes
    superseded: int = 0


class Fence(NamedTuple):
    """An activity attempt's fencing token, checked and claimed by a fenced post.

    ``key`` must share the stream's hash tag (``stream_key``) so the post script
    stays on one Redis Cluster node.
    """

    key: str
    attempt: int
    ttl_seconds: int


class LiveEvent(NamedTuple):
    """A message received on a stream's live channel."""

    seq: int
    ends: bool
    raw: bytes


def stream_key(stream_id: str, part: str) -> str:
    return f"spindle:{{{stream_id}}}:{part}"


def live_channel(stream_id: str) -> str:
    return stream_key(stream_id, "live")


def parse_live_payload(payload: bytes) -> LiveEvent:
    """Split ``b"<seq> <ends> <json>"`` without parsing the JSON."""
    seq, ends, raw = payload.split(b" ", 2)
    return LiveEvent(int(seq), ends == b"1", raw)


def stored_ts(raw: bytes) -> int:
    """Read ``ts`` from a stored message's ``{"ts":<n>,`` prefix."""
    return int(raw[6 : raw.index(b",", 6)])


# KEYS: log, seq, lastts, dedup, end, meta (the order of KEY_PARTS)
# ARGV: 1 body = compact JSON without ts and without its leading '{'
#       2 the message's own ts, or '' to use Redis TIME
#       3 dedup key, or ''         4 '1' if the message ends the conversation
#       5 max messages             6 ttl seconds
#       7 live channel             8 dedup keys kept
#       9 PUBLISH, or SPUBLISH on a cluster
# A fenced post adds KEYS[7] the activity's fence and ARGV 10 its attempt, 11 the
# fence's ttl: an attempt older than the fence's posts nothing and gets
# {latest attempt, 0, 0, 0, '', 1}; else it claims the fence and posts, in one
# round trip instead of a fence check and a post.
# Returns {seq, ts, duplicate 0|1, closed 0|1, stored bytes}.
# Numbers stay below 2^53 (ms timestamps, counters), so Lua doubles are exact.
POST_SCRIPT = """
if #KEYS > 6 then
  local current = tonumber(redis.call('GET', KEYS[7]) or '0')
  if current > tonumber(ARGV[10]) then
    return {current, 0, 0, 0, '', 1}
  end
  redis.call('SET', KEYS[7], ARGV[10], 'EX', ARGV[11])
end
local dedup_key = ARGV[3]
if dedup_key ~= '' then
  local seen = redis.call('ZSCORE', KEYS[4], dedup_key)
  if seen then
    local seq = tonumber(seen)
    local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
    local len = redis.call('LLEN', KEYS[1])
    local idx = seq - (counter - len + 1)
    if idx >= 0 and idx < len then
      local raw = redis.call('LINDEX', KEYS[1], idx)
      return {seq, tonumber(string.match(raw, '^{"ts":(%d+),')) or 0, 1, 0, raw}
    end
    return {seq, 0, 1, 0, ''}
  end
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return {0, 0, 0, 1, ''}
end
local seq = redis.call('INCR', KEYS[2])
local ts = tonumber(ARGV[2])
if not ts then
  local now = redis.call('TIME')
  ts = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
local last = tonumber(redis.call('GET', KEYS[3]) or '0')
if ts <= last then
  ts = last + 1
end
local ts_s = string.format('%d', ts)
redis.call('SET', KEYS[3], ts_s)
local stored = '{"ts":' .. ts_s .. ',' .. ARGV[1]
redis.call('RPUSH', KEYS[1], stored)
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[5]), -1)
if dedup_key ~= '' then
  redis.call('ZADD', KEYS[4], seq, dedup_key)
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -(tonumber(ARGV[8]) + 1))
end
if ARGV[4] == '1' then
  redis.call('SET', KEYS[5], seq)
end
for i = 1, 6 do
  redis.call('EXPIRE', KEYS[i], ARGV[6])
end
redis.call(ARGV[9], ARGV[7], string.format('%d', seq) .. ' ' .. ARGV[4] .. ' ' .. stored)
return {seq, ts, 0, 0, stored}
"""


def _post_body(message: CompactMessage) -> bytes:
    """The compact JSON without ``ts`` and without its opening brace."""
    wire = message.to_wire()
    wire.pop("ts", None)
    return orjson.dumps(wire)[1:]


def _post_result(reply: Sequence[Any]) -> PostResult:
    seq, ts, duplicate, closed, raw, *refused = reply
    if refused:
        return PostResult(0, 0, False, False, b"", superseded=int(seq))
    return PostResult(int(seq), int(ts), bool(duplicate), bool(closed), bytes(raw))


class MessageBus:
    """Posts messages to per-stream capped lists and reads them back.

    The bus owns its Redis client: ``close()`` closes it.

    Args:
        redis: an asyncio client (one server, Sentinel master or Redis Cluster,
            see ``spindle.shared.platform.redis_connect``) with ``decode_responses=False``.
        max_messages: how many messages each stream's list keeps.
        ttl_seconds: expiry of every key of a stream, renewed on each post.
    """

    def __init__(
        self,
        redis: RedisClient,
        *,
        max_messages: int = 1000,
        ttl_seconds: int = 90 * 86400,
    ) -> None:
        if max_messages < 1:
            raise ValueError("max_messages must be at least 1")
        if ttl_seconds < 1:
            raise ValueError("ttl_seconds must be at least 1")
        self._redis = redis
        self.max_messages = max_messages
        self.ttl_seconds = ttl_seconds
        self._post_script = redis.register_script(POST_SCRIPT)
        self._publish = publish_command(redis)

    @classmethod
    def from_settings(cls, settings: Settings) -> MessageBus:
        """A bus on ``settings.redis_url`` (any topology) with the configured
        history bounds."""
        # A bounded pool: a burst of posts (up to the worker's concurrent
        # activities) waits for a connection instead of opening hundreds.
        client = connect_redis(settings.redis_url, pool_size=REDIS_POOL_SIZE)
        return cls(
            client,
            max_messages=settings.history_max_messages,
            ttl_seconds=settings.history_ttl_days * 86400,
        )

    @property
    def redis(self) -> RedisClient:
        """The underlying client (the subscription hub is built from it)."""
        return self._redis

    async def close(self) -> None:
        await self._redis.aclose()

    async def ping(self) -> bool:
        """True when Redis answers."""
        try:
            return bool(await self._redis.ping())
        except (RedisError, OSError):
            return False

    def _keys(self, stream_id: str) -> list[str]:
        return [stream_key(stream_id, part) for part in KEY_PARTS]

    def _args(self, stream_id: str, message: CompactMessage, dedup_key: str | None) -> list[Any]:
        return [
            _post_body(message),
            message.ts or "",
            dedup_key or "",
            "1" if message.ends_conversation else "0",
            self.max_messages,
            self.ttl_seconds,
            live_channel(stream_id),
            DEDUP_KEEP,
            self._publish,
        ]

    async def post(
        self,
        stream_id: str,
        message: CompactMessage,
        *,
        dedup_key: str | None = None,
        fence: Fence | None = None,
    ) -> PostResult:
        """Append a message to a stream and publish it, atomically.

        Args:
            stream_id: the run's stream (usually its workflow id).
            message: the message; its ``ts`` is a lower bound, Redis assigns the final one.
            dedup_key: identifies the message across retries (activity id + index);
                a key seen before returns the original seq with ``duplicate=True``.
            fence: the posting attempt's fence, checked and claimed in the same
                script: a superseded attempt posts nothing (``superseded`` set).

        Returns:
            The assigned seq and ts and the stored bytes, or ``closed=True`` (seq 0)
            when the conversation has already ended.
        """
        keys = self._keys(stream_id)
        args = self._args(stream_id, message, dedup_key)
        if fence is not None:
            keys.append(fence.key)
            args.extend((fence.attempt, fence.ttl_seconds))
        reply = await self._post_script(keys=keys, args=args)
        return _post_result(reply)

    async def post_many(
        self, stream_id: str, items: Sequence[tuple[CompactMessage, str | None]]
    ) -> list[PostResult]:
        """Post several messages in one round trip; results are in input order.

        Each message is still its own atomic script run, so a conversation-ending
        message in the middle refuses the ones after it.
        """
        if not items:
            return []
        keys = self._keys(stream_id)
        # EVALSHA queued by hand: a cluster pipeline refuses script objects.
        async with self._redis.pipeline(transaction=False) as pipe:
            for message, dedup_key in items:
                args = self._args(stream_id, message, dedup_key)
                pipe.execute_command("EVALSHA", self._post_script.sha, len(keys), *keys, *args)
            replies = list(await pipe.execute(raise_on_error=False))
        for k, reply in enumerate(replies):
            if isinstance(reply, NoScriptError):
                # The node does not know the script yet (new, restarted or
                # failed over): it refused the command without running it.
                # The script object loads it and posts again, in order.
                replies[k] = await self._post_script(
                    keys=keys, args=self._args(stream_id, *items[k])
                )
            elif isinstance(reply, Exception):
                raise reply
        return [_post_result(reply) for reply in replies]

    async def history(
        self,
        stream_id: str,
        *,
        after_seq: int = 0,
        since_ts: int | None = None,
        limit: int | None = None,
    ) -> list[StoredMessage]:
        """Stored messages in seq order.

        Args:
            after_seq: keep messages with ``seq > after_seq`` (SSE ``Last-Event-ID``).
            since_ts: keep messages with ``ts > since_ts`` (seed 002 ``since``).
            limit: keep the first ``limit`` messages left after filtering.
        """
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.get(stream_key(stream_id, "seq"))
            pipe.lrange(stream_key(stream_id, "log"), 0, -1)
            counter_raw, entries = await pipe.execute()
        counter = int(counter_raw or 0)
        first_seq = counter - len(entries) + 1
        start = max(0, after_seq - first_seq + 1)
        if since_ts is not None and start < len(entries):
            # ts strictly increases along the list: O(log n) prefix reads.
            start = bisect.bisect_right(entries, since_ts, lo=start, key=stored_ts)
        stop = len(entries) if limit is None else min(len(entries), start + max(0, limit))
        return [
            StoredMessage(first_seq + k, stored_ts(entries[k]), entries[k])
            for k in range(start, stop)
        ]

    async def tail(self, stream_id: str, count: int) -> tuple[list[StoredMessage], bool]:
        """The last ``count`` stored messages in seq order, and whether they are all
        the stream keeps (a reader going back from the end reads more only if not)."""
        key = stream_key(stream_id, "log")
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.get(stream_key(stream_id, "seq"))
            pipe.llen(key)
            pipe.lrange(key, -max(1, count), -1)
            counter_raw, length, entries = await pipe.execute()
        first_seq = int(counter_raw or 0) - len(entries) + 1
        stored = [
            StoredMessage(first_seq + k, stored_ts(raw), raw) for k, raw in enumerate(entries)
        ]
        return stored, len(entries) >= int(length)

    async def last_seq(self, stream_id: str) -> int:
        """The last seq assigned on a stream, 0 when nothing was posted."""
        value = await self._redis.get(stream_key(stream_id, "seq"))
        return int(value) if value is not None else 0

    async def end_seq(self, stream_id: str) -> int | None:
        """The seq of the message that ended the conversation, if it has ended."""
        value = await self._redis.get(stream_key(stream_id, "end"))
        return int(value) if value is not None else None

    async def exists(self, stream_id: str) -> bool:
        """True when the stream has metadata or messages."""
        count = await self._redis.exists(
            stream_key(stream_id, "meta"), stream_key(stream_id, "log")
        )
        return bool(count)

    async def set_meta(self, stream_id: str, fields: dict[str, str]) -> None:
        """Store run metadata beside the stream, with the stream's TTL."""
        if not fields:
            return
        key = stream_key(stream_id, "meta")
        async with self._redis.pipeline(transaction=True) as pipe:
            mapping: dict[Any, Any] = dict(fields)
            pipe.hset(key, mapping=mapping)
            pipe.expire(key, self.ttl_seconds)
            await pipe.execute()

    async def get_meta(self, stream_id: str) -> dict[str, str]:
        raw: dict[Any, Any] = await self._redis.hgetall(stream_key(stream_id, "meta"))
        return {_text(key): _text(value) for key, value in raw.items()}

    async def delete_stream(self, stream_id: str) -> None:
        """Remove every key of a stream (tests and retention)."""
        await self._redis.delete(*self._keys(stream_id))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


__all__ = [
    "DEDUP_KEEP",
    "CompactMessage",
    "LiveEvent",
    "MessageBus",
    "PostResult",
    "StoredMessage",
    "live_channel",
    "parse_live_payload",
    "stored_ts",
    "stream_key",
]
