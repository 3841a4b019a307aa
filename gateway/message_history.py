"""A run's stored messages: Redis first, older ones from the Mongo archive.

Redis keeps the newest ``history_max_messages`` of a stream for
``history_ttl_days``; when a client asks for messages Redis no longer holds
(trimmed, or the stream expired), they come from the archive, in the same
stored bytes, so the caller serves one seq-ordered list either way.
"""

from __future__ import annotations

import logging

from shared.archive import RunArchive
from shared.bus import MessageBus, StoredMessage

log = logging.getLogger(__name__)


async def stored_messages(
    stream_id: str,
    *,
    bus: MessageBus,
    archive: RunArchive | None,
    after_seq: int = 0,
    since_ts: int | None = None,
) -> list[StoredMessage]:
    """Messages with ``seq > after_seq`` and ``ts > since_ts``, in seq order.

    Args:
        archive: None when the archive is disabled (Redis only).
    """
    recent = await bus.history(stream_id, after_seq=after_seq, since_ts=since_ts)
    if archive is None:
        return recent
    counter = recent[-1].seq if recent else await bus.last_seq(stream_id)
    upto: int | None = None  # archive seqs below this are needed (None: all)
    if counter:
        # LTRIM keeps the newest max_messages: seqs below first_kept are gone.
        first_kept = max(1, counter - bus.max_messages + 1)
        if first_kept <= after_seq + 1:
            return recent
        if since_ts is not None and (not recent or recent[0].seq > first_kept):
            # Redis still holds a message at or before ``since``: ts increases
            # with seq, so nothing older can be newer than ``since``.
            return recent
        upto = recent[0].seq if recent else first_kept
    try:
        older = await archive.messages(
            stream_id,
            after_seq=after_seq,
            limit=None if upto is None else max(0, upto - after_seq - 1),
        )
    except Exception as exc:
        log.warning("archive read of %s failed; serving what Redis holds: %s", stream_id, exc)
        return recent
    kept = [
        m for m in older if (upto is None or m.seq < upto) and (since_ts is None or m.ts > since_ts)
    ]
    return kept + recent
