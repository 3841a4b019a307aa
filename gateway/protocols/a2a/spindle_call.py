"""The caller of an A2A operation and its access to runs (shared by the handler's flows).

The bridge puts the ``Caller`` (``spindle.gateway.services.callers``: the
authenticated identity, the gateway's state and the base URL) on the SDK's
``ServerCallContext``. The helpers turn Spindle's errors into the A2A errors the
SDK serializes (with the A2A codes): an unknown run, or another tenant's, is
``TaskNotFoundError`` (-32001).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from a2a.server.context import ServerCallContext
from a2a.utils.errors import InternalError, TaskNotFoundError, UnsupportedOperationError

from spindle.gateway.models import RunDetail
from spindle.gateway.protocols.a2a.run_follower import RunFollower
from spindle.gateway.runs.access import RunAction, RunOwner
from spindle.gateway.services import run_views
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_streams import RunFollow, run_follower
from spindle.gateway.services.run_views import RunLookup
from spindle.shared.contracts.errors import Forbidden, NotFound, SpindleError

log = logging.getLogger(__name__)

CALL_KEY = "spindle"
# How long the end of a run may take to show in Temporal after its last message.
CLOSE_WAIT = timedelta(seconds=20)


def call_of(context: ServerCallContext) -> Caller:
    call = context.state.get(CALL_KEY)
    if not isinstance(call, Caller):  # the bridge always sets it
        raise InternalError(message="no caller on the A2A call context")
    return call


def follower_of(call: Caller, workflow_id: str, *, from_now: bool = False) -> RunFollower:
    """A follower of the run's messages: from the first, or (``from_now``) from entering on."""
    follow = RunFollow(workflow_id=workflow_id, live_only=from_now)
    return RunFollower(run_follower(call, follow))


async def authorize(call: Caller, task_id: str, action: RunAction) -> RunOwner:
    """The run's owner if the caller may do ``action``; another tenant's run is not found."""
    try:
        return await run_views.authorize(call, task_id, action)
    except NotFound as exc:
        raise TaskNotFoundError(message=f"task '{task_id}' was not found") from exc
    except Forbidden as exc:
        raise UnsupportedOperationError(message=exc.detail) from exc
    except SpindleError as exc:
        raise InternalError(message=exc.detail) from exc


async def describe(call: Caller, task_id: str) -> RunDetail:
    try:
        return await run_views.describe_run(call, RunLookup(workflow_id=task_id))
    except NotFound as exc:
        raise TaskNotFoundError(message=f"task '{task_id}' was not found") from exc
    except SpindleError as exc:
        raise InternalError(message=exc.detail) from exc


async def wait_closed(call: Caller, workflow_id: str) -> None:
    """Wait (bounded) until Temporal reports the workflow closed; its outcome is read after."""
    if not await run_views.await_close(call, workflow_id, CLOSE_WAIT.total_seconds()):
        log.warning("a2a: run %s did not close within %s", workflow_id, CLOSE_WAIT)
