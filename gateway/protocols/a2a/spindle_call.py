"""The caller of an A2A operation and its access to runs (shared by the handler's flows).

``SpindleCall`` is what the bridge puts on the SDK's ``ServerCallContext``: the
authenticated identity, the app's clients and the base URL. The helpers turn
Spindle's errors into the A2A errors the SDK serializes (with the A2A codes):
an unknown run, or another tenant's, is ``TaskNotFoundError`` (-32001).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta

from a2a.server.context import ServerCallContext
from a2a.utils.errors import InternalError, TaskNotFoundError, UnsupportedOperationError
from starlette.datastructures import State

from spindle.gateway.api.models import RunDetail
from spindle.gateway.protocols.a2a.run_follower import RunFollower
from spindle.gateway.runs.access import RunAction, RunOwner, authorize_run
from spindle.gateway.runs.lookup import describe_run
from spindle.shared.contracts.errors import Forbidden, NotFound, SpindleError
from spindle.shared.contracts.identity import Identity

log = logging.getLogger(__name__)

CALL_KEY = "spindle"
# How long the end of a run may take to show in Temporal after its last message.
CLOSE_WAIT = timedelta(seconds=20)


@dataclass(frozen=True)
class SpindleCall:
    """Who calls and with what: put in ``ServerCallContext.state[CALL_KEY]``."""

    identity: Identity
    state: State
    base_url: str


def call_of(context: ServerCallContext) -> SpindleCall:
    call = context.state.get(CALL_KEY)
    if not isinstance(call, SpindleCall):  # the bridge always sets it
        raise InternalError(message="no caller on the A2A call context")
    return call


def follower_of(call: SpindleCall, workflow_id: str, *, from_now: bool = False) -> RunFollower:
    """A follower of the run's messages: from the first, or (``from_now``) from entering on."""
    state = call.state
    archive = state.archive if state.settings.archive_enabled else None
    return RunFollower(
        workflow_id, hub=state.hub, bus=state.bus, archive=archive, from_now=from_now
    )


async def authorize(call: SpindleCall, task_id: str, action: RunAction) -> RunOwner:
    """The run's owner if the caller may do ``action``; another tenant's run is not found."""
    state = call.state
    try:
        return await authorize_run(
            task_id,
            call.identity,
            action,
            bus=state.bus,
            archive=state.archive,
            temporal=state.temporal,
            settings=state.settings,
        )
    except NotFound as exc:
        raise TaskNotFoundError(message=f"task '{task_id}' was not found") from exc
    except Forbidden as exc:
        raise UnsupportedOperationError(message=exc.detail) from exc
    except SpindleError as exc:
        raise InternalError(message=exc.detail) from exc


async def describe(call: SpindleCall, task_id: str) -> RunDetail:
    state = call.state
    try:
        return await describe_run(
            task_id,
            temporal=state.temporal,
            archive=state.archive,
            settings=state.settings,
            base_url=call.base_url,
        )
    except NotFound as exc:
        raise TaskNotFoundError(message=f"task '{task_id}' was not found") from exc
    except SpindleError as exc:
        raise InternalError(message=exc.detail) from exc


async def wait_closed(call: SpindleCall, workflow_id: str) -> None:
    """Wait (bounded) until Temporal reports the workflow closed; its outcome is read after."""
    handle = call.state.temporal.get_workflow_handle(workflow_id)
    try:
        async with asyncio.timeout(CLOSE_WAIT.total_seconds()):
            await handle.result()
    except TimeoutError:
        log.warning("a2a: run %s did not close within %s", workflow_id, CLOSE_WAIT)
    except Exception as exc:  # failed, canceled, terminated: all are a close
        log.debug("a2a: run %s closed with %r", workflow_id, exc)
