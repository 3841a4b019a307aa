"""Starting runs: the one start sequence every door goes through.

``admit_start`` counts one start against the caller's tenant limit (the
run-start permit) and hands back an ``AdmittedStart``; its ``start`` applies
the idempotency key, registers the webhook and follows the conversation policy
(``spindle.gateway.runs.starter``). ``start_run`` does both for a door with nothing
to do in between; JSON-RPC claims its task tree between the two, A2A and AG-UI
read the graph's input schema, schedules take the permit for a trigger and one
per run of a backfill (``admit_scheduled_starts``: Temporal starts those runs itself).

A start refused for what the caller sent (unknown graph, invalid input: any
4xx but 429) gives its permit back, so mistakes do not use up the quota.
Idempotency keys are the caller's own (``scoped_idempotency_key``): another
user of the tenant sending the same key starts a run of their own
(docs/operations/threat-model.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from spindle.gateway.models import StartRunRequest, StartRunResponse
from spindle.gateway.runs.answers import may_control
from spindle.gateway.runs.starter import (
    RunStartPermit,
    resolve_graph,
    start_prepared_run,
)
from spindle.gateway.runs.starter import start_run as start_graph_run
from spindle.gateway.services.callers import Caller
from spindle.shared.contracts.errors import RateLimited, SpindleError
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import GraphRunInput


def scoped_idempotency_key(caller: Caller, key: str) -> str:
    """``key`` as the caller's own: the same key from two users names two runs."""
    return f"user:{caller.user_id}\0{key}"


class AdmittedStart:
    """One start of a run that passed the caller's tenant run-start limit."""

    def __init__(self, caller: Caller, permit: RunStartPermit) -> None:
        self.caller = caller
        self.permit = permit

    @asynccontextmanager
    async def _refunded_if_refused(self) -> AsyncIterator[None]:
        """Give the permit back when the body is refused for the caller's mistake."""
        try:
            yield
        except SpindleError as exc:
            if 400 <= exc.status < 500 and not isinstance(exc, RateLimited):
                await self.caller.limits.refund_run_start(self.caller.tenant_id)
            raise

    def refunded_if_refused(self) -> AbstractAsyncContextManager[None]:
        """A block whose refusal for the caller's mistake gives the permit back (a fork
        checks its source and candidate in one before ``start_input``)."""
        return self._refunded_if_refused()

    async def graph(self, name: str) -> GraphSpec:
        """The tenant's registered graph ``name`` (e.g. for its input schema).

        Raises:
            NotFound: no graph is registered under that name.
        """
        state = self.caller.state
        async with self._refunded_if_refused():
            return await resolve_graph(
                StartRunRequest(graph=name), state.archive, self.caller.tenant_id
            )

    async def start(
        self, request: StartRunRequest, *, idempotency_key: str | None = None
    ) -> tuple[StartRunResponse, bool]:
        """Validate, start and record the run ``request`` asks for.

        Returns:
            The run's ids and links, and whether a new run was started (False when
            ``idempotency_key`` matched an earlier start).

        Raises:
            NotFound, GraphInvalid, ExecutorNotFound, InputInvalid: before anything
                is started.
            Unavailable: Temporal cannot be reached.
        """
        caller, state = self.caller, self.caller.state
        key = None if idempotency_key is None else scoped_idempotency_key(caller, idempotency_key)
        async with self._refunded_if_refused():
            return await start_graph_run(
                request,
                permit=self.permit,
                tenant_id=caller.tenant_id,
                user_id=caller.user_id,
                idempotency_key=key,
                temporal=state.temporal,
                archive=state.archive,
                bus=state.bus,
                catalog=state.catalog,
                settings=state.settings,
                base_url=caller.base_url,
                run_control=may_control(caller.identity, state.settings),
            )

    async def start_input(self, run_input: GraphRunInput) -> StartRunResponse:
        """Start a run whose input is built already (a fork of another run)."""
        state = self.caller.state
        return await start_prepared_run(
            run_input,
            permit=self.permit,
            temporal=state.temporal,
            archive=state.archive,
            bus=state.bus,
            settings=state.settings,
            base_url=self.caller.base_url,
        )


async def graph_is_registered(caller: Caller, name: str) -> bool:
    """Whether the caller's tenant has a graph registered as ``name`` (no permit taken)."""
    return await caller.state.archive.get_graph(name, tenant_id=caller.tenant_id) is not None


async def admit_start(caller: Caller) -> AdmittedStart:
    """Count one run start against the caller's tenant limit.

    Raises:
        RateLimited: over ``rate_limit_run_starts`` (429 / -32005, Retry-After).
    """
    await caller.limits.check_run_start(caller.tenant_id)
    return AdmittedStart(caller, RunStartPermit(caller.tenant_id))


async def admit_scheduled_starts(caller: Caller, count: int) -> None:
    """Count ``count`` runs Temporal will start for the caller (a schedule's backfill).

    All or none: a refused backfill counts nothing.

    Raises:
        RateLimited: the tenant's permits left cannot cover them (429, Retry-After).
    """
    await caller.limits.check_run_start(caller.tenant_id, count)


async def start_run(
    caller: Caller, request: StartRunRequest, *, idempotency_key: str | None = None
) -> tuple[StartRunResponse, bool]:
    """Admit and start one run (``admit_start`` then ``AdmittedStart.start``)."""
    admitted = await admit_start(caller)
    return await admitted.start(request, idempotency_key=idempotency_key)
