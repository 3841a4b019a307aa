"""An interactive agent over MCP: its answer, then the user's next message.

An interactive agent (``chat``) answers and waits (IDLE) for the next user
message (docs/conversations.md). MCP has no message to a running tool call
other than an elicitation, so a tool call or ``tasks/result`` that reaches
that wait asks the client by a form elicitation: the agent's answer is its
message, one ``message`` field the reply. Accepted with a message, it goes to
the listening agent as the next user message (``user_message``), and the call
follows the run to the agent's next answer; declined or cancelled, or on a
session that cannot take requests, the agent is completed (COMPLETE, as
``POST /runs/{id}/complete``) and the call ends with the run's output. While
it waits, the MCP task is ``input_required`` with the answer as its
``statusMessage`` (docs/protocols/mcp.md#conversations-interactive-agents).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_input import RunSignal, complete_agent, signal_run
from spindle.shared.contracts.errors import Conflict, SpindleError, ValidationFailed
from spindle.shared.contracts.runs import UserInput

if TYPE_CHECKING:  # tools imports this module
    from spindle.gateway.protocols.mcp.tools import Context

REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {
            "type": "string",
            "title": "Your reply",
            "description": "the next message for the agent; decline to finish",
            "minLength": 1,
        }
    },
    "required": ["message"],
}


async def converse(ctx: Context, caller: Caller, workflow_id: str, answer: str) -> None:
    """Ask for the user's next message and deliver it, or complete the agent.

    Raises:
        MCPError: the run refused the message or the completion.
    """
    reply: str | None = None
    if ctx.session.can_send_request:
        text = f"{answer}\n\n(Reply to go on; decline to finish.)"
        result = await ctx.session.elicit_form(
            text, REPLY_SCHEMA, related_request_id=ctx.request_id
        )
        value = (result.content or {}).get("message")
        if result.action == "accept" and isinstance(value, str) and value.strip():
            reply = value
    try:
        if reply is not None:
            message = UserInput(message=reply, metadata={"protocol": "mcp"})
            await signal_run(caller, RunSignal(workflow_id=workflow_id, input=message))
        else:
            await complete_agent(caller, workflow_id)
    except (ValidationFailed, Conflict) as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=exc.detail) from exc
    except SpindleError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=exc.detail) from exc
