"""Server-Sent Events, read line by line (the WHATWG event-stream rules).

``SseDecoder.line(text)`` takes one line (without its end) and returns the
event it completed, if any: a blank line dispatches the ``data`` gathered so
far with the ``id`` and ``event`` fields seen; ``:`` lines are comments
(keep-alives) and ``retry`` sets the server's reconnection hint.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event.

    Attributes:
        data: the event's data lines joined by newlines.
        id: the event's ``id`` field (None when it had none).
        event: the event name (None: the default ``message`` event).
    """

    data: str
    id: str | None = None
    event: str | None = None


@dataclass
class SseDecoder:
    """An incremental decoder; one instance per connection.

    Attributes:
        retry_ms: the last ``retry`` the server sent.
        comments: how many comment lines (keep-alives) were read.
    """

    retry_ms: int | None = None
    comments: int = 0
    _data: list[str] = field(default_factory=list)
    _id: str | None = None
    _event: str | None = None

    def line(self, text: str) -> SseEvent | None:
        """Feed one line; returns the event a blank line dispatched, else None."""
        if text == "":
            return self._dispatch()
        if text.startswith(":"):
            self.comments += 1
            return None
        name, colon, value = text.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "event":
            self._event = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event_id, event = self._data, self._id, self._event
        self._data, self._id, self._event = [], None, None
        if not data:
            return None
        return SseEvent("\n".join(data), event_id, event)
