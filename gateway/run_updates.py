"""Calling a run's Temporal Updates from the gateway, failures mapped once.

An Update answers the caller at once with the workflow's verdict: its
validator's refusal (an ``ApplicationError`` whose ``type`` the caller maps),
no worker in time (503), or a run Temporal no longer runs (409 finished /
404 unknown).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from gateway.problems import temporal_error
from gateway.run_lookup import closed_or_unknown
from shared.archive import RunArchive
from shared.errors import SpindleError, Unavailable

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
    try:
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
