"""``launch_workstream``, ``steer_workstream``, ``message_workstream``,
``terminate_workstream``, ``wait_workstreams``: tools of ``agent`` nodes answered
inside the workflow.

An agent node offers them by listing their names in ``params.tools``; the
``llm_turn`` activity shows the model ``WORKSTREAM_TOOL_SPECS`` for them, and
the agent loop hands their calls to a ``WorkstreamToolbox`` (no ``tool_call``
activity), which calls the same ``WorkstreamSupervisor`` methods as the run's
updates. A launch records the calling agent's node id (``launched_by``) and its
``wait`` argument: that agent hears the child's end (docs/workstreams.md). A
result is JSON text: the acknowledgement (``{"launch_id": "ws-1", …}``) or
``{"error": …, "type": …}`` for the model to read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel, ValidationError
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.errors import UnknownTool, to_application_error
from spindle.shared.contracts.workstreams import (
    INVALID_STEER,
    LAUNCH_WORKSTREAM_TOOL,
    MESSAGE_WORKSTREAM_TOOL,
    STEER_WORKSTREAM_TOOL,
    TERMINATE_WORKSTREAM_TOOL,
    WAIT_WORKSTREAMS_TOOL,
    WORKSTREAM_TOOLS,
    LaunchRequest,
    MessageWorkstream,
    SteerWorkstream,
    TerminateWorkstream,
    WaitWorkstreams,
)
from spindle.shared.graphs.expressions import ExpressionError, evaluate
from spindle.worker.contracts import NodeExecution, ToolCall, ToolCallResult
from spindle.worker.workflows.expression_budget import task_budget

if TYPE_CHECKING:
    from spindle.worker.workflows.workstreams.parent_supervisor import WorkstreamSupervisor

INVALID_ARGUMENTS = "InvalidArguments"


class _LaunchWait(BaseModel):
    """``launch_workstream``'s ``wait`` (not part of the launch the child receives)."""

    model_config = {"strict": True}

    wait: bool = True


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


class WorkstreamToolbox:
    """The workstream tools one agent node offers (``WorkflowToolbox`` protocol).

    Args:
        supervisor: the run's workstream supervisor.
        offered: the node's tool names; only the workstream ones are handled.
        launched_by: the agent node calling them: children it launches report to it,
            and ``wait_workstreams`` waits for its children.
    """

    def __init__(
        self,
        supervisor: WorkstreamSupervisor,
        offered: Iterable[str],
        launched_by: str | None = None,
    ) -> None:
        self._supervisor = supervisor
        self._names = frozenset(offered) & WORKSTREAM_TOOLS
        self._launched_by = launched_by

    @property
    def names(self) -> frozenset[str]:
        return self._names

    async def call(self, call: ToolCall) -> ToolCallResult:
        """Run one call; refusals and bad arguments come back as ``ok=False``."""
        try:
            ack = await self._dispatch(call)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            kind = INVALID_STEER if call.name == STEER_WORKSTREAM_TOOL else INVALID_ARGUMENTS
            return self._error(call, f"invalid arguments: {problems}", kind)
        except ApplicationError as exc:
            return self._error(call, exc.message, exc.type or "Error")
        return ToolCallResult(
            call_id=call.id, name=call.name, content=_json(ack.model_dump(mode="json"))
        )

    async def _dispatch(self, call: ToolCall) -> BaseModel:
        args = call.arguments
        supervisor = self._supervisor
        if call.name == LAUNCH_WORKSTREAM_TOOL:
            launch = {k: v for k, v in args.items() if k != "wait"}
            wait = _LaunchWait.model_validate({"wait": args.get("wait", True)}).wait
            return await supervisor.launch(
                LaunchRequest.model_validate(launch), launched_by=self._launched_by, wait=wait
            )
        if call.name == WAIT_WORKSTREAMS_TOOL:
            waiting = WaitWorkstreams.model_validate(args)
            return await supervisor.reports.wait(self._launched_by or "", waiting)
        if call.name == STEER_WORKSTREAM_TOOL:
            steer = {k: args[k] for k in ("command", "text") if args.get(k) is not None}
            request = SteerWorkstream.model_validate(
                {"launch_id": args.get("launch_id"), "steer": steer}
            )
            return await supervisor.steer(request, origin="agent")
        if call.name == MESSAGE_WORKSTREAM_TOOL:
            message = MessageWorkstream.model_validate(
                {"launch_id": args.get("launch_id"), "message": {"message": args.get("message")}}
            )
            return await supervisor.message(message)
        if call.name == TERMINATE_WORKSTREAM_TOOL:
            terminate = TerminateWorkstream.model_validate({"launch_id": args.get("launch_id")})
            return await supervisor.terminate(terminate)
        raise to_application_error(UnknownTool(f"'{call.name}' is not a workstream tool"))

    @staticmethod
    def _error(call: ToolCall, message: str, kind: str) -> ToolCallResult:
        return ToolCallResult(
            call_id=call.id,
            name=call.name,
            content=_json({"error": message, "type": kind}),
            ok=False,
        )


def workstream_toolbox(
    supervisor: WorkstreamSupervisor, tools: Iterable[str], launched_by: str | None = None
) -> WorkstreamToolbox | None:
    """A toolbox for agent node ``launched_by`` offering ``tools``; None if it offers
    none of ours."""
    toolbox = WorkstreamToolbox(supervisor, tools, launched_by)
    return toolbox if toolbox.names else None


def offered_tools(execution: NodeExecution) -> list[str]:
    """The tool names an agent node offers: ``params.tools``, or its ``inputs`` mapping."""
    node = execution.node
    tools: Any = node.params.get("tools")
    if "tools" in node.inputs:
        try:
            tools = evaluate(node.inputs["tools"], execution.state, budget=task_budget())
        except ExpressionError:
            return []  # the llm_turn activity reports the bad mapping
    return [t for t in tools if isinstance(t, str)] if isinstance(tools, list) else []
