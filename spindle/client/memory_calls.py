"""Memory calls of the client: what an agent's model is given, a conversation's thread.

See docs/conversations.md, Memory.
"""

from __future__ import annotations

from typing import Any

from spindle.client.models import RunRef, run_ids
from spindle.client.transport import ClientTransport, segment
from spindle.shared.contracts.memory import ConversationView, ThreadView


class MemoryCalls(ClientTransport):
    """The memory methods of ``AsyncSpindleClient``."""

    async def get_conversation(
        self,
        run: RunRef,
        *,
        node: str | None = None,
        workstream: str = "main",
        cursor: int | str = 0,
        limit: int = 100,
    ) -> ConversationView:
        """One page of what an agent of the run is given by its next (or last) LLM turn.

        Args:
            run: the run.
            node: the agent node (a workstream's agent: its launch id); default:
                the workstream's latest agent.
            workstream: ``main`` or a launch id.
            cursor: ``next_cursor`` of the previous page.
            limit: messages per page (1..500).
        """
        workflow_id, _ = run_ids(run)
        params: dict[str, Any] = {"workstream": workstream, "cursor": cursor, "limit": limit}
        if node is not None:
            params["node"] = node
        path = f"/runs/{segment(workflow_id)}/conversation"
        return await self._model(ConversationView, "GET", path, params=params)

    async def get_thread(self, conversation_id: str) -> ThreadView:
        """A conversation's runs and its agents' shared memories."""
        return await self._model(ThreadView, "GET", f"/conversations/{segment(conversation_id)}")
