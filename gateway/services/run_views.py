"""Reading a run for a caller: may it, what is it now, has it closed.

``authorize`` answers whether the caller may read or control a run (another
tenant's run is not found, as an unknown one); ``describe_run`` is what
``GET /runs/{id}``, A2A's task, AG-UI's result and MCP's tool result show;
``await_close`` waits, bounded, until Temporal reports a run closed.
"""

from __future__ import annotations

import asyncio
import logging

from pydantic import BaseModel, ConfigDict, Field

from spindle.gateway.models import RunDetail
from spindle.gateway.runs.access import RunAction, RunOwner, authorize_run
from spindle.gateway.runs.lookup import describe_run as describe_stored_run
from spindle.gateway.services.callers import Caller

log = logging.getLogger(__name__)


class RunLookup(BaseModel):
    """Which run to describe, and whether to reconcile it first.

    Attributes:
        workflow_id: the run.
        reconcile: a run Temporal closed without Spindle gets its closing
            message and document first (what ``GET /runs/{id}`` asks for).
    """

    model_config = ConfigDict(frozen=True)

    workflow_id: str = Field(min_length=1)
    reconcile: bool = False


async def authorize(caller: Caller, workflow_id: str, action: RunAction) -> RunOwner:
    """The run's owner, if the caller may do ``action`` on it.

    Raises:
        NotFound: unknown, or another tenant's run.
        Forbidden: the caller may read the run but not control it.
    """
    state = caller.state
    return await authorize_run(
        workflow_id,
        caller.identity,
        action,
        bus=state.bus,
        archive=state.archive,
        temporal=state.temporal,
        settings=state.settings,
    )


async def describe_run(caller: Caller, lookup: RunLookup) -> RunDetail:
    """Everything known about one run (status, nodes, pending input, output).

    Raises:
        NotFound: neither Temporal nor the archive knows it.
    """
    state = caller.state
    return await describe_stored_run(
        lookup.workflow_id,
        temporal=state.temporal,
        archive=state.archive,
        settings=state.settings,
        base_url=caller.base_url,
        bus=state.bus if lookup.reconcile else None,
        on_closed=state.on_run_closed if lookup.reconcile else None,
    )


async def await_close(caller: Caller, workflow_id: str, seconds: float) -> bool:
    """Wait until Temporal reports the run closed, at most ``seconds``.

    Returns:
        False when the run had not closed in time. A run that closed failed,
        cancelled or terminated is closed too: its outcome is read after.
    """
    handle = caller.state.temporal.get_workflow_handle(workflow_id)
    try:
        async with asyncio.timeout(seconds):
            await handle.result()
    except TimeoutError:
        return False
    except Exception as exc:  # failed, canceled, terminated: all are a close
        log.debug("run %s closed with %r", workflow_id, exc)
    return True
