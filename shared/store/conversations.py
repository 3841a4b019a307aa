"""Agent conversations by reference: the messages of an LLM loop, kept in Redis.

An agent node's conversation grows by a few messages per turn. Handing the whole
of it to every ``llm_turn`` activity made history grow with the square of the
turns (docs/design.md §10); instead the workflow sends each turn only the messages
new since the last one, and the activity stores them here and loads the earlier
ones. Keys share the run stream's hash tag, so they live on one Cluster slot:

    spindle:{<stream_id>}:conv:<workflow_id>:<loop id>   HASH index → message JSON

Writes are upserts by index, so a retried or repeated turn writes the same fields
again. Kept as long as the run's messages (``Settings.history_ttl_days``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from spindle.shared.bus.message_bus import stream_key
from spindle.shared.contracts.errors import NodeFailed
from spindle.shared.platform.redis_connect import RedisClient


def conversation_key(stream_id: str, workflow_id: str, loop_id: str) -> str:
    """The Redis key of one LLM loop's conversation."""
    return stream_key(stream_id, f"conv:{workflow_id}:{loop_id}")


class ConversationStore:
    """Stores and loads an LLM loop's messages by position.

    Args:
        redis: the bus's client.
        ttl_seconds: how long a conversation is kept after its last write.
    """

    def __init__(self, redis: RedisClient, ttl_seconds: int) -> None:
        self.redis = redis
        self.ttl_seconds = ttl_seconds

    async def save(self, key: str, start: int, messages: Sequence[dict[str, Any]]) -> None:
        """Store ``messages`` at positions ``start``, ``start + 1``, …"""
        if not messages:
            return
        fields: list[str | bytes] = []
        for i, message in enumerate(messages):
            fields += [str(start + i), orjson.dumps(message)]
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, items=fields)
            pipe.expire(key, self.ttl_seconds)
            await pipe.execute()

    async def load(self, key: str, count: int) -> list[dict[str, Any]]:
        """The first ``count`` messages, in order.

        Raises:
            NodeFailed: some of them are not stored (expired or evicted): the agent
                cannot go on without its conversation.
        """
        if count <= 0:
            return []
        raw: list[bytes | str | None] = await self.redis.hmget(key, [str(i) for i in range(count)])
        found = [value for value in raw if value is not None]
        if len(found) < count:
            missing = [i for i, value in enumerate(raw) if value is None]
            raise NodeFailed(
                f"{len(missing)} of {count} earlier messages of the conversation are gone",
                context={"key": key, "first_missing": missing[0]},
            )
        return [orjson.loads(value) for value in found]
