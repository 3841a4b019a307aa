"""The thread's messages at an interrupt, for AG-UI's MESSAGES_SNAPSHOT.

AG-UI asks a run that ends with an interrupt to send ``STATE_SNAPSHOT`` and
``MESSAGES_SNAPSHOT`` before its ``RUN_FINISHED`` (docs.ag-ui.com, concepts:
Interrupts, "State at the interrupt boundary"). A consumer replaces its
messages with the snapshot's, so the snapshot holds the whole conversation: the
messages the client sent in its ``RunAgentInput`` (as sent), then the messages
this AG-UI run produced (assistant text with its tool calls, tool results), each
under the id its events used. The transcript is built from the same events the
mapper emits, so it is as deterministic as they are (docs/protocols/agui.md).
"""

from __future__ import annotations

from typing import Any


class Transcript:
    """The messages of one AG-UI run, as its events build them.

    Args:
        sent: the ``RunAgentInput``'s messages (camelCase dicts, as sent).
    """

    def __init__(self, sent: list[dict[str, Any]]) -> None:
        self._sent = sent
        self._made: dict[str, dict[str, Any]] = {}

    def observe(self, body: dict[str, Any]) -> None:
        """Take one emitted event's part of the conversation (others are ignored)."""
        kind = body["type"]
        if kind == "TEXT_MESSAGE_START":
            self._message(body["messageId"], body)
        elif kind == "TEXT_MESSAGE_CONTENT":
            message = self._message(body["messageId"], body)
            message["content"] = str(message.get("content") or "") + body["delta"]
        elif kind == "TOOL_CALL_START":
            parent = self._message(body.get("parentMessageId") or body["toolCallId"], body)
            function = {"name": body["toolCallName"], "arguments": ""}
            call = {"id": body["toolCallId"], "type": "function", "function": function}
            parent.setdefault("toolCalls", []).append(call)
        elif kind == "TOOL_CALL_ARGS":
            for message in self._made.values():
                for call in message.get("toolCalls", []):
                    if call["id"] == body["toolCallId"]:
                        call["function"]["arguments"] += body["delta"]
        elif kind == "TOOL_CALL_RESULT":
            result = {
                "id": body["messageId"],
                "role": "tool",
                "toolCallId": body["toolCallId"],
                "content": body["content"],
            }
            if "subagentRunId" in body:
                result["subagentRunId"] = body["subagentRunId"]
            self._made[body["messageId"]] = result

    def _message(self, message_id: str, body: dict[str, Any]) -> dict[str, Any]:
        message = self._made.get(message_id)
        if message is None:
            message = {"id": message_id, "role": "assistant"}
            if "subagentRunId" in body:
                message["subagentRunId"] = body["subagentRunId"]
            self._made[message_id] = message
        return message

    def snapshot(self) -> list[dict[str, Any]]:
        """The messages sent, then those made here (a sent id is not repeated)."""
        sent_ids = {m.get("id") for m in self._sent}
        made = [dict(m) for m in self._made.values() if m["id"] not in sent_ids]
        return [*self._sent, *made]
