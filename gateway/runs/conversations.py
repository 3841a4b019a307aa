"""Runs of a conversation: handed to its ``Conversation`` workflow, listed from it.

The gateway never decides whether a conversation is busy: it sends the run to
the conversation's workflow with update-with-start (the workflow is started by
the first run of the conversation), and the workflow's answer — started, queued,
or refused with ``ConversationBusy`` — is the one every gateway process gets
(docs/conversations.md).
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from spindle.gateway.http.temporal_errors import temporal_error
from spindle.gateway.runs.temporal import RPC_TIMEOUT
from spindle.gateway.runs.updates import UPDATE_TIMEOUT
from spindle.shared.contracts.conversations import (
    CANCEL_QUEUED_RUN_UPDATE,
    CONVERSATION_RUNS_QUERY,
    CONVERSATION_WORKFLOW,
    SUBMIT_RUN_UPDATE,
    CancelQueuedRun,
    ConversationInput,
    ConversationRuns,
    IfBusy,
    QueuedRunCanceled,
    SubmitAck,
    SubmitRun,
    conversation_workflow_id,
)
from spindle.shared.contracts.errors import (
    NotFound,
    SpindleError,
    Unavailable,
    from_application_error,
)
from spindle.shared.contracts.runs import GraphRunInput
from spindle.shared.platform.settings import Settings

log = logging.getLogger(__name__)


async def submit_to_conversation(
    temporal: Client,
    run_input: GraphRunInput,
    *,
    workflow_id: str,
    conversation_id: str,
    if_busy: IfBusy,
    settings: Settings,
    run_control: bool = False,
) -> SubmitAck:
    """Hand a validated, admitted run to its conversation's workflow.

    Args:
        run_control: the submitter holds a run-control role (may interrupt or roll
            back another user's run).

    Raises:
        ConversationBusy: ``if_busy`` is ``reject`` and a run is going (409).
        Forbidden: ``interrupt`` or ``rollback`` would end another user's run and
            the submitter may not control it (403; nothing starts).
        Unavailable: Temporal or a worker did not answer in time (503).
    """
    conversation = ConversationInput(
        tenant_id=run_input.tenant_id,
        conversation_id=conversation_id,
        task_queue=settings.task_queue,
    )
    start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        CONVERSATION_WORKFLOW,
        conversation,
        id=conversation_workflow_id(run_input.tenant_id, conversation_id),
        task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        memo={"tenant": run_input.tenant_id, "conversation": conversation_id},
        static_summary=f"conversation {conversation_id}",
    )
    submit = SubmitRun(
        workflow_id=workflow_id, run_input=run_input, if_busy=if_busy, run_control=run_control
    )
    try:
        ack: SubmitAck = await temporal.execute_update_with_start_workflow(
            SUBMIT_RUN_UPDATE,
            submit,
            start_workflow_operation=start,
            # The run's id: a retried submit is the same update, applied once.
            id=f"submit-{workflow_id}",
            result_type=SubmitAck,
            rpc_timeout=UPDATE_TIMEOUT,
        )
    except WorkflowUpdateFailedError as exc:
        raise _refusal(exc.cause) from exc
    except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
        raise _not_answering(conversation_id) from exc
    except RPCError as exc:
        raise temporal_error(exc) from exc
    return ack


def _not_answering(conversation_id: str) -> Unavailable:
    """The conversation's workflow did not answer an update in time."""
    return Unavailable(
        f"conversation '{conversation_id}' did not answer within "
        f"{UPDATE_TIMEOUT.total_seconds():.0f}s (is a worker running?); retry",
        retry_after=5,
    )


def _refusal(cause: BaseException | None) -> SpindleError:
    error = from_application_error(cause)
    if error is not None:
        return error
    return SpindleError(f"the conversation refused the run: {cause}")


async def conversation_runs(
    temporal: Client, *, tenant_id: str, conversation_id: str
) -> ConversationRuns:
    """Every run of the tenant's conversation, oldest first.

    Raises:
        NotFound: no conversation of that id in this tenant (another tenant's
            conversation of the same id is another workflow: also unknown).
        Unavailable: Temporal or a worker cannot answer.
    """
    handle = temporal.get_workflow_handle(conversation_workflow_id(tenant_id, conversation_id))
    try:
        runs: ConversationRuns = await handle.query(
            CONVERSATION_RUNS_QUERY, result_type=ConversationRuns, rpc_timeout=RPC_TIMEOUT
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"conversation '{conversation_id}' was not found") from exc
        raise temporal_error(exc) from exc
    except WorkflowQueryFailedError as exc:
        log.warning("conversation %s could not be queried: %s", conversation_id, exc)
        raise Unavailable(
            f"conversation '{conversation_id}' cannot be read now; retry", retry_after=5
        ) from exc
    return runs


async def cancel_queued(
    temporal: Client, *, tenant_id: str, conversation_id: str, cancel: CancelQueuedRun
) -> QueuedRunCanceled:
    """Ask the conversation to drop a queued run (``cancel_queued_run``).

    Returns:
        The run's state after it: ``canceled`` when it left the queue now; a run
        that had started says so (cancel it as a run); None: the conversation, or
        the run in it, is unknown.

    Raises:
        Unavailable: Temporal or a worker did not answer in time.
    """
    handle = temporal.get_workflow_handle(conversation_workflow_id(tenant_id, conversation_id))
    try:
        found: QueuedRunCanceled = await handle.execute_update(
            CANCEL_QUEUED_RUN_UPDATE,
            cancel,
            # One id per run: a retried cancel is the same update, applied once.
            id=f"cancel-queued-{cancel.workflow_id}",
            result_type=QueuedRunCanceled,
            rpc_timeout=UPDATE_TIMEOUT,
        )
    except WorkflowUpdateFailedError as exc:
        raise _refusal(exc.cause) from exc
    except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
        raise _not_answering(conversation_id) from exc
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return QueuedRunCanceled(workflow_id=cancel.workflow_id)
        raise temporal_error(exc) from exc
    return found
