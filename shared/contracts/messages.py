"""Agent messages: the wire contract between runs and the clients watching them.

Two formats exist, as in seed 002: ``CompactMessage`` is what is stored in Redis
and sent over SSE (short keys, nothing that equals its default), and
``AgentMessage`` is the readable form UI code works with. The numeric values of
``AgentMessageType`` are part of the wire contract and must never change.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

MAIN_WORKSTREAM = "main"


class AgentMessageType(IntEnum):
    """What a message is. Values are wire contract: never renumber."""

    SYSTEM = 0
    THOUGHT = 1
    PLAN = 2
    UPDATE = 3
    COMPLETE = 4
    WARNING = 5
    ERROR = 6
    ANSWER = 7
    QUESTION = 8
    REQUEST_INPUT = 9
    IDLE = 10
    TERMINATED = 11
    STREAMING_CHUNK = 12
    BATCH_PROGRESS = 13
    RESTARTING = 14


PlanStatus = Literal["pending", "in_progress", "done"]


class PlanTask(BaseModel):
    """One task of a PLAN message's ``d.tasks``."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=500, description="what the task is")
    status: PlanStatus = Field("pending", description="pending, in_progress or done")


class PlanDetails(BaseModel):
    """The details (``d``) of a PLAN (type 2) message an agent posts with ``update_plan``.

    Wire shape: ``{"node_id": "...", "source": "update_plan", "tasks": [{"title":
    "...", "status": "pending" | "in_progress" | "done"}], "explanation": "..."}``.
    Each PLAN replaces the node's previous one (the whole list is sent each time).
    The agent loop's own PLAN (its first tool calls) has ``source`` unset and
    ``tasks`` of ``{"name", "arguments", "title"}``. See docs/graphs/tools.md#plans.
    """

    node_id: str
    source: Literal["update_plan"] = "update_plan"
    tasks: list[PlanTask]
    explanation: str | None = None


class CompactMessage(BaseModel):
    """Wire format: ``t`` type, ``m`` text, ``w`` workstream (absent for main),
    ``d`` details, ``f`` final-chunk flag, ``ts`` epoch ms, ``i`` activity id."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    t: AgentMessageType
    m: str | None = None
    w: str | None = None
    d: Any = None
    f: int | None = Field(default=None, ge=0, le=1)
    ts: int | None = None
    i: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The smallest JSON-able dict: no nulls, no ``w`` for main."""
        out: dict[str, Any] = {}
        if self.ts is not None:
            # ts first: stored messages are scanned by this prefix (see bus.py).
            out["ts"] = self.ts
        out["t"] = int(self.t)
        if self.m is not None:
            out["m"] = self.m
        if self.w is not None and self.w != MAIN_WORKSTREAM:
            out["w"] = self.w
        if self.d is not None:
            out["d"] = self.d
        if self.f is not None:
            out["f"] = self.f
        if self.i is not None:
            out["i"] = self.i
        return out

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_wire())

    @property
    def workstream(self) -> str:
        return self.w or MAIN_WORKSTREAM

    @property
    def ends_conversation(self) -> bool:
        """True for the message after which nothing more is posted to the run."""
        return self.workstream == MAIN_WORKSTREAM and self.t in (
            AgentMessageType.COMPLETE,
            AgentMessageType.TERMINATED,
        )


class AgentMessage(BaseModel):
    """UI format with readable field names (seed 002)."""

    model_config = ConfigDict(extra="ignore")

    timestamp: int
    workflow_run_id: str
    type: AgentMessageType
    message: str = ""
    details: Any = None
    workstream_id: str | None = None
    # Wire-only in seed 002's interface; carried so that a UI can drop streaming
    # chunks superseded by the final message of the same activity.
    activity_id: str | None = None
    is_final: bool | None = None


def parse_message(data: str | bytes | dict[str, Any]) -> CompactMessage:
    """Read a message in either format and return it in the wire format.

    Accepts a JSON string/bytes or a dict, compact (``t``) or readable (``type``).

    Raises:
        ValueError: the input is neither format.
    """
    raw: Any = orjson.loads(data) if isinstance(data, str | bytes) else data
    if not isinstance(raw, dict):
        raise ValueError("a message must be a JSON object")
    if "t" in raw:
        return CompactMessage.model_validate(raw)
    if "type" in raw:
        return to_compact_message(AgentMessage.model_validate(raw))
    raise ValueError("a message needs 't' (compact) or 'type' (readable)")


def to_agent_message(compact: CompactMessage, run_id: str) -> AgentMessage:
    """Convert wire format to UI format; a missing workstream means ``main``."""
    return AgentMessage(
        timestamp=compact.ts or 0,
        workflow_run_id=run_id,
        type=compact.t,
        message=compact.m or "",
        details=compact.d,
        workstream_id=compact.workstream,
        activity_id=compact.i,
        is_final=None if compact.f is None else bool(compact.f),
    )


def to_compact_message(msg: AgentMessage) -> CompactMessage:
    """Convert UI format to wire format, dropping what equals a default."""
    return CompactMessage(
        t=msg.type,
        m=msg.message or None,
        w=None if msg.workstream_id in (None, MAIN_WORKSTREAM) else msg.workstream_id,
        d=msg.details,
        f=None if msg.is_final is None else int(msg.is_final),
        ts=msg.timestamp or None,
        i=msg.activity_id,
    )


def create_compact_message(
    type: AgentMessageType,
    message: str | None = None,
    *,
    workstream_id: str | None = None,
    details: Any = None,
    final: bool | None = None,
    timestamp: int | None = None,
    activity_id: str | None = None,
) -> CompactMessage:
    """Server-side constructor with readable argument names."""
    return CompactMessage(
        t=type,
        m=message,
        w=None if workstream_id in (None, MAIN_WORKSTREAM) else workstream_id,
        d=details,
        f=None if final is None else int(final),
        ts=timestamp,
        i=activity_id,
    )


# Redis prepends ``"ts":<13 digits>,`` when it stores a message without one.
_STORED_TS_BYTES = len(b'"ts":1700000000000,')
_TRUNCATED = "… [truncated {} bytes]"


def stored_size(message: CompactMessage) -> int:
    """Bytes the message takes once stored (``ts`` counted even when Redis adds it)."""
    size = len(message.to_json())
    return size if message.ts is not None else size + _STORED_TS_BYTES


def cut_to_size(message: CompactMessage, max_bytes: int) -> CompactMessage:
    """The message, made to fit ``max_bytes`` once stored; unchanged when it fits.

    The text is cut on a UTF-8 character boundary and ends with the marker
    ``… [truncated N bytes]`` (N: the UTF-8 bytes of text removed). Details too
    large to leave room for a text are replaced by
    ``{"truncated": true, "bytes": <their JSON size>}``. Pure function.
    """
    if stored_size(message) <= max_bytes:
        return message
    text = message.m or ""
    # Room the marker may take (N has at most as many digits as the text's size).
    marker_room = len(_TRUNCATED.format(len(text.encode()) or 1).encode()) + len(b',"m":""')
    if stored_size(message.model_copy(update={"m": None})) + marker_room > max_bytes:
        details_bytes = len(orjson.dumps(message.d))
        message = message.model_copy(update={"d": {"truncated": True, "bytes": details_bytes}})
        if stored_size(message) <= max_bytes:
            return message
    if not text:
        return message
    data = text.encode()
    keep = max(0, len(data) - (stored_size(message) - max_bytes) - marker_room)
    while True:
        kept = data[:keep].decode("utf-8", errors="ignore")
        cut = len(data) - len(kept.encode())
        fitted = message.model_copy(update={"m": kept + _TRUNCATED.format(cut)})
        excess = stored_size(fitted) - max_bytes
        if excess <= 0 or keep == 0:
            return fitted
        # JSON escapes (quotes, control characters) take more room than the raw text.
        keep = max(0, keep - excess)
