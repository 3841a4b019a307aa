"""Calling a run's Temporal Updates from the gateway, failures mapped once.

An Update answers the caller at once with the workflow's verdict: its
validator's refusal (an ``ApplicationError`` whose ``type`` the caller maps),
no worker in time (503), or a run Temporal no longer runs (409 finished /
404 unknown).

When the gateway traces, the update joins the run's trace: a ``RunUpdate:<name>``
span, child of the span that started the run (its ``traceparent`` in the run
document) and linked to this request's span, is current around the call, so
Temporal's ``StartWorkflowUpdate`` span (and the worker's ``HandleUpdate``) are
in the run's trace.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from opentelemetry import trace
from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from spindle.gateway.http.temporal_errors import temporal_error
from spindle.gateway.runs.lookup import closed_or_unknown
from spindle.shared.contracts.errors import SpindleError, Unavailable
from spindle.shared.platform.telemetry import joined_run_trace
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.run_trace import run_traceparent

log = logging.getLogger(__name__)

# An update waits for a worker to run its validator and handler; past this the
# client retries (same update id → the workflow does not apply it twice).
UPDATE_TIMEOUT = timedelta(seconds=20)

Result = TypeVar("Result", bound=BaseModel)


async def execute_run_update(
    temporal: Client,
    archive: RunArchive,
    *,
    workflow_id: str,
    name: str,
    argument: BaseModel,
    result_type: type[Result],
    update_id: str,
    refused: Callable[[BaseException], SpindleError],
) -> Result:
    """Run update ``name`` on the run and return its result.

    Raises:
        SpindleError: ``refused(cause)`` when the workflow refused the update;
            Unavailable when no worker answered in time or Temporal is down;
            Conflict / NotFound when the run has finished / is unknown.
    """
    handle = temporal.get_workflow_handle(workflow_id)
    traceparent = await _run_traceparent(archive, workflow_id)
    try:
        with joined_run_trace(
            f"RunUpdate:{name}",
            run_id=workflow_id,
            traceparent=traceparent,
            attributes={"updateId": update_id},
        ):
            result: Result = await handle.execute_update(
                name, argument, id=update_id, result_type=result_type, rpc_timeout=UPDATE_TIMEOUT
            )
        return result
    except WorkflowUpdateFailedError as exc:
        raise refused(exc.cause) from exc
    except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
        raise Unavailable(
            f"run '{workflow_id}' did not answer {name} within "
            f"{UPDATE_TIMEOUT.total_seconds():.0f}s (is a worker running?); retry",
            retry_after=5,
        ) from exc
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise await closed_or_unknown(temporal, archive, workflow_id) from exc
        raise temporal_error(exc) from exc


async def _run_traceparent(archive: RunArchive, workflow_id: str) -> str | None:
    """The trace context the run started under, looked up only when this
    request is traced; a lookup that fails leaves the update in its own trace."""
    if not trace.get_current_span().is_recording():
        return None
    try:
        return await run_traceparent(archive, workflow_id)
    except Exception as exc:
        log.info("trace context of run %s unavailable: %s", workflow_id, exc)
        return None
