"""Forking a run for a caller: ``POST /runs/{workflow_id}/fork``.

This service only fetches and checks: the source's start input from Temporal
(``run_records.start_input``, so inline specs fork too), its recorded outputs from
the archive's node reports, the candidate graph from the registry or the request;
the fork itself is built by ``spindle.shared.graphs.forks.build_fork_input`` (the
evaluations workflow builds its forks there too). The fork's graph and input are
validated as a run start's are (a 422 naming every fault) before it starts under
the caller's run-start permit (docs/replay-and-compare.md).
"""

from __future__ import annotations

from spindle.gateway.models import StartRunRequest, StartRunResponse
from spindle.gateway.runs.starter import resolve_graph
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_records import start_input
from spindle.gateway.services.run_starts import admit_start
from spindle.shared.contracts.errors import Conflict
from spindle.shared.contracts.forks import ForkRequest
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import GraphRunInput
from spindle.shared.graphs.forks import build_fork_input, recorded_outputs
from spindle.shared.graphs.validation import validate_graph, validate_run_input
from spindle.shared.platform.mcp_servers import check_graph_mcp_servers, check_run_mcp_servers
from spindle.shared.platform.outbound import outbound_policy


async def candidate_graph(caller: Caller, request: ForkRequest) -> GraphSpec | None:
    """The graph the fork runs instead of the source's, if the request names one.

    Raises:
        NotFound: no graph is registered under ``graph``.
        GraphInvalid: ``graph_spec`` does not match the graph schema.
        Conflict: the registered graph is not of the ``version`` asked for.
    """
    if request.graph is None and request.graph_spec is None:
        return None
    start = StartRunRequest(graph=request.graph, graph_spec=request.graph_spec)
    spec = await resolve_graph(start, caller.state.archive, caller.tenant_id)
    if request.version is not None and spec.version != request.version:
        raise Conflict(
            f"graph '{spec.name}' is registered at version '{spec.version}', "
            f"not '{request.version}' (the registry keeps the latest version of a name)"
        )
    return spec


async def validated(caller: Caller, run_input: GraphRunInput) -> None:
    """Check the fork's graph and input as a run start's (every fault named at once).

    Raises:
        GraphInvalid, ExecutorNotFound, InputInvalid, OutboundRefused: a 422.
    """
    settings = caller.state.settings
    spec = run_input.graph
    validate_graph(spec, await caller.state.catalog.get(), max_node_visits=settings.max_node_visits)
    policy = outbound_policy(settings)
    check_graph_mcp_servers(spec, stdio_commands=settings.mcp_stdio_commands, policy=policy)
    validate_run_input(spec, run_input.input)
    check_run_mcp_servers(
        spec,
        {"input": run_input.input, "context": run_input.context, "meta": run_input.meta},
        stdio_commands=settings.mcp_stdio_commands,
        policy=policy,
    )


async def fork_input(caller: Caller, workflow_id: str, request: ForkRequest) -> GraphRunInput:
    """The validated ``GraphRunInput`` of a fork of ``workflow_id`` (nothing started).

    Raises:
        NotFound: the source run or the candidate graph is unknown.
        Conflict: the source is not a graph run, has no recorded outputs to reuse,
            or the candidate is not of the version asked for.
        ValidationFailed: from_node, an override, a state key, the candidate or the
            input is invalid (naming each).
    """
    source = await start_input(caller, workflow_id)
    candidate = await candidate_graph(caller, request)
    reports = await caller.state.archive.node_reports(workflow_id)
    identity = caller.identity
    run_input = build_fork_input(
        source,
        recorded_outputs(reports),
        request,
        source_workflow_id=workflow_id,
        candidate=candidate,
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
    )
    if run_input.replay is not None and run_input.replay.graph_changed:
        await validated(caller, run_input)
    elif "input" in request.model_fields_set:
        validate_run_input(run_input.graph, run_input.input)
    return run_input


async def fork_run(caller: Caller, workflow_id: str, request: ForkRequest) -> StartRunResponse:
    """Admit (run-start permit), build and start a fork of ``workflow_id``.

    Raises:
        RateLimited: over the tenant's run-start limit.
        NotFound, Conflict, ValidationFailed: as ``fork_input`` (the permit is given back).
        Unavailable: Temporal or MongoDB cannot be reached.
    """
    admitted = await admit_start(caller)
    async with admitted.refunded_if_refused():
        run_input = await fork_input(caller, workflow_id, request)
    return await admitted.start_input(run_input)
