"""The AG-UI 1.0 request Spindle accepts: ``RunAgentInput`` (camelCase on the wire).

Only what Spindle acts on is typed strictly (ids, messages, resume entries);
the rest of AG-UI's input is accepted and kept as sent, as the protocol's own
models do with fields they do not know.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

_CAMEL = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class AguiMessage(BaseModel):
    """One message of the conversation so far (any AG-UI role)."""

    model_config = _CAMEL

    id: str = Field(min_length=1, max_length=200)
    role: str
    content: Any = None


class AguiResumeEntry(BaseModel):
    """The answer to one interrupt of the previous AG-UI run."""

    model_config = _CAMEL

    interrupt_id: str = Field(min_length=1, max_length=200, description="the interrupt answered")
    status: Literal["resolved", "cancelled"]
    payload: Any = Field(None, description="the answer: an object for the responseSchema, or text")
    metadata: dict[str, Any] | None = None


class AguiRunInput(BaseModel):
    """AG-UI's ``RunAgentInput``: run the agent (a Spindle graph) on a thread.

    ``forwardedProps.input`` (when given) is the run input as is; otherwise the
    text of the last user message fills the graph's single required string
    input. ``resume`` answers the interrupt the thread's run waits on.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "threadId": "thread-1",
                    "runId": "run-1",
                    "messages": [{"id": "m1", "role": "user", "content": "Q3 budget"}],
                }
            ]
        },
    )

    thread_id: str = Field(min_length=1, max_length=200, description="the conversation")
    run_id: str = Field(min_length=1, max_length=200, description="this AG-UI run")
    protocol_version: str | None = None
    parent_run_id: str | None = None
    state: Any = None
    messages: list[AguiMessage] = Field(default_factory=list, max_length=1000)
    tools: list[dict[str, Any]] | None = None
    context: list[dict[str, Any]] | None = None
    forwarded_props: Any = None
    # AG-UI allows one entry per interrupt; a Spindle run waits on one at a time, and
    # entries beyond it are reported (RUN_ERROR), so a few are accepted.
    resume: list[AguiResumeEntry] | None = Field(None, max_length=16)

    def sent_messages(self) -> list[dict[str, Any]]:
        """The messages as sent (camelCase), for the MESSAGES_SNAPSHOT at an interrupt."""
        return [m.model_dump(by_alias=True, exclude_none=True) for m in self.messages]

    def last_user_text(self) -> str:
        """The text of the last user message ('' when there is none)."""
        for message in reversed(self.messages):
            if message.role != "user":
                continue
            content = message.content
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                texts = [
                    str(part.get("text") or "")
                    for part in content
                    if isinstance(part, dict) and part.get("type") == "text"
                ]
                return "\n".join(t for t in texts if t)
        return ""

    def forwarded_input(self) -> tuple[bool, Any]:
        """``(True, value)`` when ``forwardedProps.input`` is set."""
        props = self.forwarded_props
        if isinstance(props, dict) and "input" in props:
            return True, props["input"]
        return False, None


class RejectionCode(StrEnum):
    """The ``code`` of a RUN_ERROR that refuses a ``RunAgentInput`` (docs/protocols/agui.md)."""

    INTERRUPT_PENDING = "INTERRUPT_PENDING"
    """No ``resume`` on a thread whose run waits on a prompt (AG-UI interrupts, rule 4)."""
    UNKNOWN_INTERRUPT = "UNKNOWN_INTERRUPT"
    """A resume naming no open interrupt of the thread: unknown, answered or superseded."""
    INTERRUPT_EXPIRED = "INTERRUPT_EXPIRED"
    """A ``resolved`` resume past the interrupt's ``expiresAt`` (it may still be cancelled)."""
    INVALID_RESUME = "INVALID_RESUME"
    """A payload the prompt refuses (``metadata.errors`` names each field)."""
    RUN_BUSY = "RUN_BUSY"
    """The thread's run is still running and takes no (or no new) user message."""
    CURSOR_EXPIRED = "CURSOR_EXPIRED"
    """A reconnect whose run's messages are no longer kept (``metadata.oldestSeq``)."""
    CURSOR_BEYOND_END = "CURSOR_BEYOND_END"
    """A reconnect's ``Last-Event-ID`` past the run's last message (``metadata.lastSeq``)."""
    CURSOR_NOT_IN_RUN = "CURSOR_NOT_IN_RUN"
    """A reconnect's ``Last-Event-ID`` outside this AG-UI run's events (another run's)."""


class AguiRejection(BaseModel):
    """A ``RunAgentInput`` refused before anything starts: its stream is one RUN_ERROR."""

    code: RejectionCode
    message: str
    metadata: dict[str, Any] | None = None

    def frame(self) -> bytes:
        """The SSE frame of the RUN_ERROR (id ``0.0``: the stream has nothing else)."""
        body: dict[str, Any] = {"type": "RUN_ERROR", "message": self.message, "code": self.code}
        if self.metadata:
            body["metadata"] = self.metadata
        return b"id: 0.0\ndata: %s\n\n" % orjson.dumps(body)
