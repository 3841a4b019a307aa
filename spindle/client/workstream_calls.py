"""Workstream calls of the client: launch, list, steer, message, terminate.

A workstream is a child run its parent launched; every call goes to the parent
run's ``/runs/{workflowId}/workstreams`` routes (see docs/workstreams.md).
"""

from __future__ import annotations

from typing import Any

from spindle.client.models import RunRef, run_ids
from spindle.client.transport import ClientTransport, segment
from spindle.shared.contracts.workstreams import (
    LaunchAck,
    LaunchRequest,
    SteerAck,
    SteerCommand,
    SteerRequest,
    TerminateAck,
    WorkstreamAgent,
    WorkstreamInfo,
    WorkstreamList,
    WorkstreamMessageAck,
    WorkstreamMessageRequest,
)


class WorkstreamCalls(ClientTransport):
    """The workstream methods of ``AsyncSpindleClient``."""

    def _ws_path(self, run: RunRef, launch_id: str | None = None, leaf: str = "") -> str:
        workflow_id, _ = run_ids(run)
        path = f"/runs/{segment(workflow_id)}/workstreams"
        if launch_id is not None:
            path += f"/{segment(launch_id)}"
        return f"{path}/{leaf}" if leaf else path

    async def launch_workstream(
        self,
        run: RunRef,
        task: str,
        *,
        deadline_seconds: int | None = None,
        interactive: bool = False,
        merge_child_artifacts: bool = True,
        label: str | None = None,
        agent: WorkstreamAgent | dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> LaunchAck:
        """Launch a workstream (a child run) on a running run; answers at once.

        Args:
            run: the parent run.
            task: what the child must do.
            deadline_seconds: 30..1800 (default 300).
            interactive: wait for follow-up messages after the task.
            merge_child_artifacts: copy the child's artifacts into the parent's files.
            label: a display name.
            agent: the child's ``system`` prompt, ``tools``, ``max_turns``, ``model``.
            idempotency_key: a retried launch with the same key returns the same one.
        """
        fields: dict[str, Any] = {
            "task": task,
            "interactive": interactive,
            "merge_child_artifacts": merge_child_artifacts,
            "label": label,
        }
        if deadline_seconds is not None:
            fields["deadline_seconds"] = deadline_seconds
        if agent is not None:
            fields["agent"] = WorkstreamAgent.model_validate(agent)
        body = LaunchRequest.model_validate(fields).model_dump(mode="json", exclude_none=True)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return await self._model(LaunchAck, "POST", self._ws_path(run), json=body, headers=headers)

    async def list_workstreams(self, run: RunRef) -> WorkstreamList:
        """The run's workstreams: state, phase, iteration, % of deadline used."""
        return await self._model(WorkstreamList, "GET", self._ws_path(run))

    async def get_workstream(self, run: RunRef, launch_id: str) -> WorkstreamInfo:
        """One workstream of the run."""
        return await self._model(WorkstreamInfo, "GET", self._ws_path(run, launch_id))

    async def steer_workstream(
        self, run: RunRef, launch_id: str, command: SteerCommand | str, text: str | None = None
    ) -> SteerAck:
        """Steer a running workstream (the child acknowledges on the stream).

        Args:
            run: the parent run.
            launch_id: the workstream (``ws-1``, …).
            command: ``add_instruction``, ``set_priority``, ``add_constraint`` (with
                ``text``), ``pause_requested`` or ``resume_requested``.
            text: the instruction, priority or constraint.
        """
        body = SteerRequest(command=SteerCommand(command), text=text)
        return await self._model(
            SteerAck,
            "POST",
            self._ws_path(run, launch_id, "steer"),
            json=body.model_dump(mode="json", exclude_none=True),
        )

    async def message_workstream(
        self, run: RunRef, launch_id: str, message: str
    ) -> WorkstreamMessageAck:
        """A follow-up message to an interactive workstream."""
        body = WorkstreamMessageRequest(message=message)
        return await self._model(
            WorkstreamMessageAck,
            "POST",
            self._ws_path(run, launch_id, "messages"),
            json=body.model_dump(mode="json"),
        )

    async def terminate_workstream(self, run: RunRef, launch_id: str) -> TerminateAck:
        """Stop a workstream (it ends ``canceled``)."""
        return await self._model(TerminateAck, "POST", self._ws_path(run, launch_id, "terminate"))
