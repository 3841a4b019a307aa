"""Conversation calls of the client: talk to a running agent, end an interactive one.

A message goes to the run's listening agent at its next turn boundary (echoed as
QUESTION); an interactive agent answers, posts IDLE and waits for the next one until
``complete`` (see docs/conversations.md, "Talking to a running agent").
"""

from __future__ import annotations

import uuid
from typing import Any

from spindle.client.models import RunRef, run_ids
from spindle.client.stream import run_path
from spindle.client.transport import ClientTransport, segment
from spindle.shared.contracts.runs import CompleteAck, SignalAck, UserInput

USER_INPUT_SIGNAL = "UserInput"


class ConversationCalls(ClientTransport):
    """The conversation methods of ``AsyncSpindleClient``."""

    async def send_message(
        self,
        run: RunRef,
        message: str,
        *,
        client_message_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        node_id: str | None = None,
        workstream_id: str | None = None,
    ) -> SignalAck:
        """Send a user message to the run's listening agent (or the prompt that waits).

        Args:
            run: the run.
            message: the text.
            client_message_id: a retried send with the same id is taken once
                (default: a new id); echoed in the QUESTION's details.
            metadata: free-form context, echoed in the QUESTION's details.
            node_id: the agent node to reach (default: the latest one listening).
            workstream_id: an interactive workstream to reach instead of the main one.

        Raises:
            ConflictError: no agent listens and no prompt waits (the detail says
                why), the agent's queue is full, or the run has finished.
        """
        user_input = UserInput(
            message=message,
            node_id=node_id,
            workstream_id=workstream_id,
            metadata=metadata,
            client_message_id=client_message_id or f"py-{uuid.uuid4().hex}",
        )
        workflow_id, run_id = run_ids(run)
        path = run_path(workflow_id, run_id, f"signal/{USER_INPUT_SIGNAL}")
        body = user_input.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        return await self._model(SignalAck, "POST", path, json=body)

    async def complete(self, run: RunRef) -> CompleteAck:
        """End the run's listening interactive agent (COMPLETE); the graph goes on.

        Raises:
            ConflictError: no interactive agent listens, or the run has finished.
        """
        workflow_id, _ = run_ids(run)
        return await self._model(CompleteAck, "POST", f"/runs/{segment(workflow_id)}/complete")
