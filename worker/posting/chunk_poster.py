"""Posting the STREAMING_CHUNK messages of one LLM activity attempt.

Each chunk is ``{"t": 12, "m": <text>, "i": <activity id>}`` (``w`` for a
workstream), the last one of a stream adds ``"f": 1``; the THOUGHT/ANSWER the
activity posts afterwards carries the same ``i`` and supersedes them.

Dedup keys are ``<run>:<activity id>:chunk:<attempt>:<n>``: a post repeated
within one attempt (a Redis retry) is stored once, while a retried attempt's
chunks get keys of their own. They must: the new attempt's tokens and chunk
boundaries differ from the failed one's, and the RESTARTING message posted
first tells clients to drop the failed attempt's chunks, so a key shared with
those would swallow the new text.

If an earlier attempt already posted the final THOUGHT/ANSWER (it failed after
posting, e.g. while archiving), the retry streams nothing: its final post is a
duplicate that the bus ignores, so nothing would supersede new chunks.

Chunks are a live preview: they are not archived to MongoDB (the archive keeps
the final message), and a chunk that cannot be posted stops the preview of this
attempt without failing the activity (the final post reports a real outage).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from spindle.shared.bus.message_bus import stream_key
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message

if TYPE_CHECKING:
    from spindle.worker.posting.poster import MessagePoster

logger = logging.getLogger(__name__)


class ChunkPoster:
    """The chunk sink of one activity attempt (see the module docstring).

    Args:
        poster: the activity's poster (run, activity id, attempt, bus); its
            next post must be the final THOUGHT/ANSWER that supersedes the chunks.
    """

    def __init__(self, poster: MessagePoster) -> None:
        self.poster = poster
        self.posted = 0
        self.enabled = True
        self._final_key = poster.next_post_key

    async def open(self) -> bool:
        """Decide whether this attempt streams; False when an earlier attempt
        already posted the final message."""
        if self.poster.attempt > 1:
            try:
                seen = await self.poster.bus.redis.zscore(
                    stream_key(self.poster.run.stream_id, "dedup"), self._final_key
                )
            except (RedisError, OSError) as exc:
                logger.warning("cannot check %s for an earlier answer: %s", self._final_key, exc)
                seen = None
            self.enabled = seen is None
        return self.enabled

    async def __call__(self, text: str, last: bool) -> None:
        """Post one chunk (``last``: the stream's final chunk, ``f: 1``)."""
        if not self.enabled:
            return
        poster = self.poster
        message = create_compact_message(
            AgentMessageType.STREAMING_CHUNK,
            text or None,
            workstream_id=poster.run.workstream_id,
            final=True if last else None,
            activity_id=poster.activity_id,
        )
        key = poster.dedup_key(f"chunk:{poster.attempt}:{self.posted}")
        try:
            result = await poster.bus.post(poster.run.stream_id, message, dedup_key=key)
        except (RedisError, OSError) as exc:
            logger.warning(
                "streaming of %s in %s stopped: %s", poster.activity_id, poster.run.stream_id, exc
            )
            self.enabled = False
            return
        self.posted += 1
        if result.closed:
            self.enabled = False  # the conversation has ended: nobody reads on
