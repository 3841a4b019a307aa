"""A run's messages as AG-UI 1.0 events: one AG-UI run per segment of the message stream.

A Spindle run is one AG-UI thread. Its message stream is cut into segments, one
per AG-UI run: the first starts at the beginning, each later one right after
the REQUEST_INPUT the previous one ended on (a HITL prompt is an AG-UI
interrupt; the resume starts a new AG-UI run on the same thread). The mapper is
a pure function of the segment's messages, so every event has a stable id,
``<seq>.<k>``: the sequence number of the message it comes from and its index
among that message's events (the opening events take the segment's start seq).
A client that reconnects with its last id gets the rest exactly once: the
segment is mapped again and everything up to that id is dropped
(docs/protocols/agui.md; docs/streaming/gap-free.md).

What maps to what:

- STREAMING_CHUNK → TEXT_MESSAGE_START / CONTENT (one message per activity);
  the activity's final THOUGHT or ANSWER closes it (TEXT_MESSAGE_END); a
  THOUGHT or ANSWER that was not streamed is a whole text message.
- a THOUGHT's ``tool_calls`` → TOOL_CALL_START / ARGS / END; the tool's result
  (the UPDATE or BATCH_PROGRESS with ``call_id`` and ``result`` the tool call
  posts after running) → TOOL_CALL_RESULT.
- a node's messages (``details.node_id``) → STEP_STARTED / STEP_FINISHED, one
  open step per workstream: the next node's message, the node's final message
  (ANSWER, an answered prompt) or the segment's end closes it; each step also
  updates the AG-UI state (STATE_SNAPSHOT at the start, STATE_DELTA after).
- a workstream (``w``) → a subagent: SUBAGENT_STARTED at its first message,
  its events carry ``subagentRunId``, its COMPLETE → SUBAGENT_FINISHED
  (SUBAGENT_ERROR when it failed).
- the main REQUEST_INPUT → STATE_SNAPSHOT and MESSAGES_SNAPSHOT (the thread's
  messages: those the client sent, then this run's, ``transcript``), then
  RUN_FINISHED with an ``interrupt`` outcome (the prompt, its uiSchema as
  ``responseSchema``); COMPLETE → RUN_FINISHED (the run's output as ``result``)
  or RUN_ERROR after the run's ERROR; TERMINATED → RUN_FINISHED with a
  ``cancelled`` outcome.
- the main IDLE of an agent waiting for the user (``waiting_for`` empty) →
  RUN_FINISHED (success): the next user message is a new AG-UI run. A run that
  sent a user message (``awaits``: its ``client_message_id``) ends only at an
  IDLE after that message's QUESTION echo.
- every other message → CUSTOM ``spindle.<type>`` with its text and details.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from spindle.gateway.protocols.agui.transcript import Transcript
from spindle.shared.contracts.messages import MAIN_WORKSTREAM, AgentMessageType, CompactMessage

PROTOCOL_VERSION = "1.0"
INTERRUPT_PREFIX = "prompt-"
T = AgentMessageType


class SegmentEnd(StrEnum):
    """How an AG-UI run ended."""

    INTERRUPT = "interrupt"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    IDLE = "idle"


def interrupt_id(seq: int) -> str:
    """The AG-UI interrupt id of the REQUEST_INPUT message at ``seq``."""
    return f"{INTERRUPT_PREFIX}{seq}"


def interrupt_seq(value: str) -> int | None:
    """The seq an interrupt id names (None: not one of ours)."""
    if not value.startswith(INTERRUPT_PREFIX):
        return None
    digits = value.removeprefix(INTERRUPT_PREFIX)
    return int(digits) if digits.isdigit() else None


def parse_event_id(value: str) -> tuple[int, int] | None:
    """``"<seq>.<k>"`` as a pair (None when it is not an event id of this mapping)."""
    seq, dot, index = value.strip().partition(".")
    if not dot or not seq.isdigit() or not index.isdigit():
        return None
    return int(seq), int(index)


@dataclass(frozen=True)
class AguiEvent:
    """One AG-UI event: its SSE id and its JSON body (camelCase, no nulls)."""

    seq: int
    index: int
    body: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.seq}.{self.index}"

    def after(self, cursor: tuple[int, int] | None) -> bool:
        return cursor is None or (self.seq, self.index) > cursor

    def frame(self) -> bytes:
        """The SSE frame: ``id:`` then one ``data:`` line of JSON."""
        return b"id: %s\ndata: %s\n\n" % (self.id.encode(), orjson.dumps(self.body))


def _pointer(token: str) -> str:
    """One JSON Pointer reference token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def _details(message: CompactMessage) -> dict[str, Any]:
    return message.d if isinstance(message.d, dict) else {}


def _node_of(message: CompactMessage) -> str | None:
    node = _details(message).get("node_id")
    return node if isinstance(node, str) and node else None


def _is_tool_result(message: CompactMessage) -> bool:
    """The message a tool call posts after running, with what the tool returned."""
    kinds = (AgentMessageType.UPDATE, AgentMessageType.BATCH_PROGRESS)
    return message.t in kinds and {"call_id", "result"} <= _details(message).keys()


def _set_at(document: dict[str, Any], path: str, value: Any) -> None:
    """``add`` / ``replace`` of a JSON Patch on objects only (the state this mapper writes)."""
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]
    for token in tokens[:-1]:
        document = document.setdefault(token, {})
    document[tokens[-1]] = value


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


@dataclass
class _Owner:
    """What is open for one workstream (main, or a subagent)."""

    subagent: str | None
    step: str | None = None
    texts: dict[str, str] = field(default_factory=dict)  # activity id → message id


class SegmentMapper:
    """The AG-UI events of one segment of a run's messages (one AG-UI run).

    Args:
        thread_id: the AG-UI thread (the client's).
        run_id: the AG-UI run (the client's).
        workflow_id: the Spindle run.
        start_seq: the segment holds the messages after this seq.
        sent: the messages of the ``RunAgentInput`` (for MESSAGES_SNAPSHOT).
        awaits: the ``client_message_id`` of the user message this AG-UI run
            sent: an IDLE ends the run only after that message's echo.
    """

    def __init__(
        self,
        *,
        thread_id: str,
        run_id: str,
        workflow_id: str,
        start_seq: int,
        sent: list[dict[str, Any]] | None = None,
        awaits: str | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.workflow_id = workflow_id
        self.start_seq = start_seq
        self.end: SegmentEnd | None = None
        self.error: str | None = None
        self._seq = start_seq
        self._events: list[AguiEvent] = []
        self._main = _Owner(None)
        self._subagents: dict[str, _Owner] = {}
        self._finished_subagents: set[str] = set()
        self._transcript = Transcript(sent or [])
        self._state_now: dict[str, Any] = {}
        self._awaits = awaits

    # -- emitting --------------------------------------------------------------

    def _emit(self, body: dict[str, Any], ts: int | None = None) -> None:
        if ts is not None:
            body["timestamp"] = ts
        self._events.append(AguiEvent(self._seq, len(self._events), body))
        self._transcript.observe(body)

    def _take(self) -> list[AguiEvent]:
        events, self._events = self._events, []
        return events

    @staticmethod
    def _attributed(owner: _Owner, body: dict[str, Any]) -> dict[str, Any]:
        if owner.subagent is not None:
            body["subagentRunId"] = owner.subagent
        return body

    # -- the run ---------------------------------------------------------------

    def opening(self) -> list[AguiEvent]:
        """RUN_STARTED and the first STATE_SNAPSHOT (ids ``<start_seq>.0`` and ``.1``)."""
        self._seq = self.start_seq
        self._emit(
            {
                "type": "RUN_STARTED",
                "threadId": self.thread_id,
                "runId": self.run_id,
                "protocolVersion": PROTOCOL_VERSION,
            }
        )
        snapshot = {"workflowId": self.workflow_id, "status": "running", "steps": {}}
        self._state_now = {**snapshot, "steps": {}}
        self._emit({"type": "STATE_SNAPSHOT", "snapshot": snapshot})
        return self._take()

    def feed(self, seq: int, message: CompactMessage) -> list[AguiEvent]:
        """The events of the message at ``seq``; sets ``end`` when the segment ends here."""
        if self.end is not None:
            return []
        self._seq = seq
        workstream = message.workstream
        if workstream == MAIN_WORKSTREAM:
            self._main_message(message)
        elif workstream in self._finished_subagents:
            self._custom(self._main, message, {"workstream": workstream})
        else:
            self._subagent_message(workstream, message)
        return self._take()

    def finish(self, result: Any = None) -> list[AguiEvent]:
        """The closing events once ``end`` is set: close what is open, then the run's end.

        Args:
            result: the run's output (for a completed run).
        """
        assert self.end is not None, "feed() the segment's last message first"
        # At an interrupt or an idle agent the run goes on: its subagents are suspended.
        waiting = self.end in (SegmentEnd.INTERRUPT, SegmentEnd.IDLE)
        for name in list(self._subagents):
            self._close_subagent(name, suspended=waiting)
        self._close_owner(self._main)
        if self.end == SegmentEnd.INTERRUPT:
            return self._take()  # the interrupt's RUN_FINISHED was built by feed()
        status = {
            "completed": "completed",
            "failed": "failed",
            "cancelled": "canceled",
            "idle": "idle",
        }
        self._state([{"op": "replace", "path": "/status", "value": status[self.end.value]}])
        if self.end == SegmentEnd.FAILED:
            self._emit({"type": "RUN_ERROR", "message": self.error or "the run failed"})
            self._events[-1].body["code"] = "RUN_FAILED"
        else:
            finished: dict[str, Any] = {
                "type": "RUN_FINISHED",
                "threadId": self.thread_id,
                "runId": self.run_id,
            }
            if self.end == SegmentEnd.CANCELLED:
                finished["outcome"] = {"type": "cancelled"}
            else:
                finished["outcome"] = {"type": "success"}
                if result is not None:
                    finished["result"] = result
            self._emit(finished)
        return self._take()

    # -- main workstream -------------------------------------------------------

    def _main_message(self, message: CompactMessage) -> None:
        kind = message.t
        if kind == T.REQUEST_INPUT:
            self._interrupt(message)
            return
        if kind == T.COMPLETE:
            status = _details(message).get("status")
            self.end = SegmentEnd.FAILED if status == "failed" else SegmentEnd.COMPLETED
            return
        if kind == T.TERMINATED:
            self.end = SegmentEnd.CANCELLED
            return
        if kind == T.QUESTION and self._awaits is not None:
            if _details(message).get("client_message_id") == self._awaits:
                self._awaits = None  # the message this run sent was taken: its answer follows
        elif kind == T.IDLE and self._awaits is None and not _details(message).get("waiting_for"):
            self.end = SegmentEnd.IDLE  # the agent answered and waits for the user
            return
        if kind == T.ERROR and _node_of(message) is None:
            self.error = message.m or self.error  # the run's own error; COMPLETE follows
        self._content(self._main, message)

    def _interrupt(self, message: CompactMessage) -> None:
        details = _details(message)
        node = _node_of(message)
        if node is not None:
            self._step(self._main, node, message.ts)
        self._close_owner(self._main)
        for name in list(self._subagents):
            self._close_subagent(name, suspended=True)
        schema = details.get("ui_schema")
        interrupt: dict[str, Any] = {
            "id": interrupt_id(self._seq),
            "reason": "input_required",
            "message": message.m or str(details.get("prompt") or "input required"),
            "metadata": {"nodeId": node, "workflowId": self.workflow_id},
        }
        if isinstance(schema, dict):
            interrupt["responseSchema"] = schema
        expires = details.get("expires_at")
        if isinstance(expires, str):
            interrupt["expiresAt"] = expires
        for key in ("assignees", "roles"):  # who may answer, when the prompt says
            if isinstance(details.get(key), list):
                interrupt["metadata"][key] = details[key]
        # What a resume needs, before the interrupt (AG-UI: state at the interrupt boundary).
        self._state_now["status"] = "input_required"
        self._state_now["pendingInput"] = {"interruptId": interrupt["id"]}
        self._emit({"type": "STATE_SNAPSHOT", "snapshot": copy.deepcopy(self._state_now)})
        self._emit({"type": "MESSAGES_SNAPSHOT", "messages": self._transcript.snapshot()})
        self._emit(
            {
                "type": "RUN_FINISHED",
                "threadId": self.thread_id,
                "runId": self.run_id,
                "outcome": {"type": "interrupt", "interrupts": [interrupt]},
            },
            message.ts,
        )
        self.end = SegmentEnd.INTERRUPT

    # -- content of any workstream ---------------------------------------------

    def _content(self, owner: _Owner, message: CompactMessage) -> None:
        node = _node_of(message)
        if node is not None:
            self._step(owner, node, message.ts)
        kind = message.t
        if kind == T.STREAMING_CHUNK:
            self._chunk(owner, message)
        elif kind in (T.THOUGHT, T.ANSWER):
            parent = self._text(owner, message)
            self._tool_calls(owner, message, parent)
        elif _is_tool_result(message):
            self._tool_result(owner, message)
        else:
            extra = {"workstream": owner.subagent} if owner.subagent else None
            self._custom(owner, message, extra)
        node_done = kind == T.ANSWER or (kind == T.QUESTION and node is not None)
        if node_done and owner.step is not None:
            self._finish_step(owner, message.ts)

    def _chunk(self, owner: _Owner, message: CompactMessage) -> None:
        activity = message.i or f"seq-{self._seq}"
        message_id = owner.texts.get(activity)
        if message_id is None:
            message_id = f"{self.workflow_id}:{self._seq}"
            owner.texts[activity] = message_id
            start = {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
            self._emit(self._attributed(owner, start), message.ts)
        delta = message.m or ""
        content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta}
        self._emit(self._attributed(owner, content), message.ts)

    def _text(self, owner: _Owner, message: CompactMessage) -> str:
        """Close the streamed text of the message's activity, or send it whole."""
        streamed = owner.texts.pop(message.i, None) if message.i else None
        if streamed is not None:
            end = {"type": "TEXT_MESSAGE_END", "messageId": streamed}
            self._emit(self._attributed(owner, end), message.ts)
            return streamed
        message_id = f"{self.workflow_id}:{self._seq}"
        start = {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
        self._emit(self._attributed(owner, start), message.ts)
        if message.m:
            content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": message.m}
            self._emit(self._attributed(owner, content), message.ts)
        self._emit(self._attributed(owner, {"type": "TEXT_MESSAGE_END", "messageId": message_id}))
        return message_id

    def _tool_calls(self, owner: _Owner, message: CompactMessage, parent: str) -> None:
        calls = _details(message).get("tool_calls")
        if not isinstance(calls, list):
            return
        for call in calls:
            if not isinstance(call, dict) or not call.get("id") or not call.get("name"):
                continue
            call_id = str(call["id"])
            start = {
                "type": "TOOL_CALL_START",
                "toolCallId": call_id,
                "toolCallName": str(call["name"]),
                "parentMessageId": parent,
            }
            self._emit(self._attributed(owner, start), message.ts)
            args = {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": call_id,
                "delta": _arguments(call.get("arguments", {})),
            }
            self._emit(self._attributed(owner, args))
            self._emit(self._attributed(owner, {"type": "TOOL_CALL_END", "toolCallId": call_id}))

    def _tool_result(self, owner: _Owner, message: CompactMessage) -> None:
        details = _details(message)
        call_id = str(details["call_id"])
        result = details["result"]
        body = {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{self.workflow_id}:{self._seq}",
            "toolCallId": call_id,
            "content": result if isinstance(result, str) else _arguments(result),
            "role": "tool",
        }
        self._emit(self._attributed(owner, body), message.ts)

    def _custom(self, owner: _Owner, message: CompactMessage, extra: dict[str, Any] | None) -> None:
        value: dict[str, Any] = {"seq": self._seq}
        if message.m is not None:
            value["text"] = message.m
        if message.d is not None:
            value["details"] = message.d
        if extra:
            value.update(extra)
        name = f"spindle.{T(message.t).name.lower()}"
        custom = {"type": "CUSTOM", "name": name, "value": value}
        self._emit(self._attributed(owner, custom), message.ts)

    # -- steps and state -------------------------------------------------------

    def _step_name(self, owner: _Owner, node: str) -> str:
        return node if owner.subagent is None else f"{owner.subagent}/{node}"

    def _step(self, owner: _Owner, node: str, ts: int | None) -> None:
        name = self._step_name(owner, node)
        if owner.step == name:
            return
        if owner.step is not None:
            self._finish_step(owner, ts)
        owner.step = name
        self._emit(self._attributed(owner, {"type": "STEP_STARTED", "stepName": name}), ts)
        if owner.subagent is None:
            path = f"/steps/{_pointer(name)}"
            self._state([{"op": "add", "path": path, "value": {"status": "running"}}])

    def _finish_step(self, owner: _Owner, ts: int | None = None) -> None:
        name = owner.step
        if name is None:
            return
        owner.step = None
        self._emit(self._attributed(owner, {"type": "STEP_FINISHED", "stepName": name}), ts)
        if owner.subagent is None:
            path = f"/steps/{_pointer(name)}/status"
            self._state([{"op": "replace", "path": path, "value": "finished"}])

    def _state(self, operations: list[dict[str, Any]]) -> None:
        for operation in operations:
            _set_at(self._state_now, operation["path"], operation["value"])
        self._emit({"type": "STATE_DELTA", "delta": operations})

    def _close_owner(self, owner: _Owner) -> None:
        """End every open text message and step of a workstream."""
        for message_id in owner.texts.values():
            end = {"type": "TEXT_MESSAGE_END", "messageId": message_id}
            self._emit(self._attributed(owner, end))
        owner.texts.clear()
        self._finish_step(owner)

    # -- subagents (workstreams) -----------------------------------------------

    def _subagent_message(self, name: str, message: CompactMessage) -> None:
        owner = self._subagents.get(name)
        if owner is None:
            owner = _Owner(name)
            self._subagents[name] = owner
            self._emit(
                {"type": "SUBAGENT_STARTED", "subagentRunId": name, "name": name}, message.ts
            )
        if message.t == T.COMPLETE:
            details = _details(message)
            failed = details.get("status") in ("failed", "timeout", "canceled")
            self._close_subagent(name, error=message.m if failed else None, result=details)
            return
        self._content(owner, message)

    def _close_subagent(
        self,
        name: str,
        *,
        suspended: bool = False,
        error: str | None = None,
        result: Any = None,
    ) -> None:
        owner = self._subagents.pop(name)
        self._close_owner(owner)
        if error is not None:
            self._emit({"type": "SUBAGENT_ERROR", "subagentRunId": name, "message": error})
            self._finished_subagents.add(name)
            return
        body: dict[str, Any] = {"type": "SUBAGENT_FINISHED", "subagentRunId": name}
        if suspended:
            body["outcome"] = {"type": "suspended"}
        else:
            self._finished_subagents.add(name)
            body["outcome"] = {"type": "success"}
            if result is not None:
                body["result"] = result
        self._emit(body)
