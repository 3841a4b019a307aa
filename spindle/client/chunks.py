"""Live text of streamed LLM tokens, per activity (seed 002's STREAMING_CHUNK).

While a model generates, its activity posts STREAMING_CHUNK messages (``t``
12) carrying the new text, all with the activity's id ``i`` (and the
workstream's ``w``); the last chunk has ``f: 1``. Chunks are keyed by
``(workstream, i)``. The final THOUGHT or ANSWER of that key carries the whole
text and supersedes the chunks: a client shows the final message instead of
them. A RESTARTING message of that key (a retried LLM call) voids the chunks so
far, so a retry never shows a garbled double answer. Chunks after a final
message start a new text.

``TokenAssembler.feed`` applies these rules to each message and says what a
display should do; ``TokenAssembler.live`` holds the texts still being
streamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from spindle.client.models import StreamedMessage
from spindle.shared.contracts.messages import MAIN_WORKSTREAM, AgentMessageType

SUPERSEDING = frozenset({AgentMessageType.THOUGHT, AgentMessageType.ANSWER})


class ChunkEvent(StrEnum):
    """What a message did to the live texts."""

    STARTED = "started"  # the first chunk of an activity: a new live text
    APPENDED = "appended"  # more text for a live text
    SUPERSEDED = "superseded"  # the final THOUGHT/ANSWER replaces a live text
    VOIDED = "voided"  # RESTARTING: the live text is thrown away
    NONE = "none"  # the message has nothing to do with streamed tokens


@dataclass
class LiveText:
    """The text an activity has streamed so far.

    Attributes:
        activity_id: the activity's id (``i``), or "" for chunks without one.
        workstream: who is streaming (``main`` or a launch id).
        text: the chunks' text, joined.
        chunks: how many chunks arrived.
        complete: the last chunk (``f: 1``) arrived; the final message is due.
    """

    activity_id: str
    workstream: str = MAIN_WORKSTREAM
    text: str = ""
    chunks: int = 0
    complete: bool = False


@dataclass
class ChunkUpdate:
    """The outcome of feeding one message.

    Attributes:
        event: what happened.
        live: the live text concerned (its state after the message), if any.
    """

    event: ChunkEvent
    live: LiveText | None = None


@dataclass
class TokenAssembler:
    """Assembles STREAMING_CHUNK messages into live text per activity id.

    Feed it every message of a stream, in order. Chunks are never worth showing
    once the final message of their activity is there, so ``live`` (keyed by
    ``(workstream, activity id)``) only ever holds texts whose final message has
    not arrived yet.
    """

    live: dict[tuple[str, str], LiveText] = field(default_factory=dict)

    def feed(self, message: StreamedMessage) -> ChunkUpdate:
        """Apply one message; returns what it did to the live texts."""
        key = (message.workstream, message.activity_id or "")
        if message.type is AgentMessageType.STREAMING_CHUNK:
            current = self.live.get(key)
            event = ChunkEvent.APPENDED
            if current is None:
                current = LiveText(key[1], message.workstream)
                self.live[key] = current
                event = ChunkEvent.STARTED
            current.text += message.text
            current.chunks += 1
            current.complete = current.complete or bool(message.compact.f)
            return ChunkUpdate(event, current)
        if message.activity_id is None or key not in self.live:
            return ChunkUpdate(ChunkEvent.NONE)
        if message.type in SUPERSEDING:
            return ChunkUpdate(ChunkEvent.SUPERSEDED, self.live.pop(key))
        if message.type is AgentMessageType.RESTARTING:
            return ChunkUpdate(ChunkEvent.VOIDED, self.live.pop(key))
        return ChunkUpdate(ChunkEvent.NONE)

    def text(self, activity_id: str, workstream: str = MAIN_WORKSTREAM) -> str | None:
        """The live text of an activity, or None when nothing is streaming for it."""
        live = self.live.get((workstream, activity_id))
        return None if live is None else live.text
