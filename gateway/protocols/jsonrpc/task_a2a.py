"""Seed 003 tasks in A2A's ``Task`` shape (seed 003: "a tasks.* task is an A2A task").

One mapping serves both doors: ``tasks.execute`` with ``response_format``
``a2a`` (A2A 1.0 JSON) or ``a2a-0.3`` answers with the root task in this shape,
and A2A's ``GetTask`` / ``CancelTask`` / ``SubscribeToTask`` (and their 0.3
names) take a ``tasks.*`` task's UUID (``spindle.gateway.protocols.a2a.seed_tasks``).

Seed 003's table maps its task ``id`` to A2A's ``context_id`` and calls A2A's
``id`` the execution instance. Spindle gives both the task's UUID, so the id
a ``tasks.*`` client holds is the id an A2A client asks for (the run executing
the tree is ``metadata.workflowId``). Statuses map pending → submitted,
in_progress → working, completed → completed (the ``result`` as the
``result`` artifact: data for an object or array, else text), failed → failed
(``error`` as ``status.message``), cancelled → canceled. ``metadata`` carries
``protocol: "a2a"``, ``rootTaskId``, ``userId``, ``name``, ``progress`` and,
once it runs, ``workflowId`` (seed 003's ``metadata.user_id`` is camelCase
like every other A2A member).

This module imports only the a2a-sdk and the task contracts, so the JSON-RPC
methods and the A2A package can both use it without an import cycle.
"""

from __future__ import annotations

from typing import Any, Literal

from a2a.compat.v0_3.conversions import to_compat_task
from a2a.helpers import new_data_part, new_text_part
from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict

from spindle.gateway.protocols.jsonrpc.task_params import invalid
from spindle.shared.contracts.tasks import Task as SeedTask

ResponseFormat = Literal["seed", "a2a", "a2a-0.3"]
RESPONSE_FORMATS: tuple[ResponseFormat, ...] = ("seed", "a2a", "a2a-0.3")
RESULT_ARTIFACT = "result"

STATE_BY_TASK_STATUS: dict[str, TaskState] = {
    "pending": TaskState.TASK_STATE_SUBMITTED,
    "in_progress": TaskState.TASK_STATE_WORKING,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}


def response_format(params: dict[str, Any]) -> ResponseFormat:
    """``params.response_format`` (default ``seed``: seed 003's own answer).

    Raises:
        ValidationFailed: a value that is not one of ``RESPONSE_FORMATS`` (-32602).
    """
    value = params.get("response_format", "seed")
    for known in RESPONSE_FORMATS:
        if value == known:
            return known
    raise invalid(
        "response_format", f"must be one of {', '.join(RESPONSE_FORMATS)} (got {value!r})"
    )


def _result_artifact(result: Any) -> Artifact:
    part: Part
    if isinstance(result, dict | list):
        part = new_data_part(result)
    else:
        part = new_text_part("" if result is None else str(result))
    return Artifact(artifact_id=RESULT_ARTIFACT, name=RESULT_ARTIFACT, parts=[part])


def a2a_task(task: SeedTask) -> Task:
    """The A2A task of a stored ``tasks.*`` task (module docs)."""
    state = STATE_BY_TASK_STATUS.get(task.status, TaskState.TASK_STATE_WORKING)
    status = TaskStatus(state=state)
    if task.error and state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED):
        status.message.CopyFrom(
            Message(
                message_id=f"{task.id}-{task.status}",
                role=Role.ROLE_AGENT,
                parts=[new_text_part(task.error)],
                task_id=task.id,
                context_id=task.id,
            )
        )
    a2a = Task(id=task.id, context_id=task.id, status=status)
    if state == TaskState.TASK_STATE_COMPLETED:
        a2a.artifacts.append(_result_artifact(task.result))
    metadata: dict[str, Any] = {
        "protocol": "a2a",
        "rootTaskId": task.root_task_id or task.id,
        "userId": task.user_id,
        "name": task.name,
        "progress": task.progress,
    }
    if task.workflow_id:
        metadata["workflowId"] = task.workflow_id
    a2a.metadata.update(metadata)
    return a2a


def task_json(task: Task, fmt: ResponseFormat) -> dict[str, Any]:
    """``task`` as A2A 1.0 JSON (``a2a``) or A2A 0.3 JSON (``a2a-0.3``, with ``kind``)."""
    if fmt == "a2a-0.3":
        return to_compat_task(task).model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(MessageToDict(task))
