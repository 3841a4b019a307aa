"""Starting a run: validate everything first, then start ``GraphRun`` by name.

Every path that starts runs goes through ``spindle.gateway.services.run_starts``,
which takes the tenant's run-start permit (``RunStartPermit``) first: the start
functions here take it, so no path can start a run without passing the limit.

Nothing is started or written when validation fails. Once Temporal has
accepted the start the run is real: the archive document and the stream's
metadata are written best-effort (a failure is logged, the client still gets
its ids, and the worker's own writes fill the archive in).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from spindle.gateway.http.temporal_errors import temporal_error
from spindle.gateway.models import (
    RunWebhook,
    StartRunRequest,
    StartRunResponse,
    WebhookCreated,
)
from spindle.gateway.runs.catalog_cache import CatalogCache
from spindle.gateway.runs.conversations import submit_to_conversation
from spindle.gateway.runs.temporal import (
    GRAPH_KEY,
    RPC_TIMEOUT,
    TENANT_KEY,
    new_workflow_id,
    temporal_ui_url,
)
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.conversations import ConversationRunState, IfBusy
from spindle.shared.contracts.errors import NotFound, OutboundRefused
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, RunStatus
from spindle.shared.graphs.structure import name_inline_graph, parse_graph
from spindle.shared.graphs.validation import validate_graph, validate_run_input
from spindle.shared.platform import metrics
from spindle.shared.platform.mcp_servers import check_graph_mcp_servers, check_run_mcp_servers
from spindle.shared.platform.outbound import outbound_policy
from spindle.shared.platform.settings import Settings
from spindle.shared.platform.telemetry import current_trace_ids, current_traceparent
from spindle.shared.platform.webhook_signature import MASKED_SECRET, new_secret
from spindle.shared.store.archive import RunArchive, RunRecord
from spindle.shared.tasks.webhooks import WebhookConfig, Webhooks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunStartPermit:
    """Proof that one run start of ``tenant_id`` passed the tenant's run-start limit
    (issued by ``spindle.gateway.services.run_starts.admit_start`` only)."""

    tenant_id: str


async def resolve_graph(body: StartRunRequest, archive: RunArchive, tenant_id: str) -> GraphSpec:
    """The graph to run: the registered one by name, or the inline spec.

    Raises:
        NotFound: no graph is registered under that name.
        GraphInvalid: the inline spec does not match the graph schema.
    """
    if body.graph_spec is not None:
        return parse_graph(name_inline_graph(body.graph_spec))
    assert body.graph is not None
    stored = await archive.get_graph(body.graph, tenant_id=tenant_id)
    if stored is None:
        raise NotFound(f"graph '{body.graph}' is not registered (see GET /graphs)")
    if isinstance(stored, GraphSpec):
        return stored
    return parse_graph(stored)


async def build_run_input(
    body: StartRunRequest,
    *,
    tenant_id: str,
    user_id: str | None,
    archive: RunArchive,
    catalog: CatalogCache,
    settings: Settings,
) -> GraphRunInput:
    """The validated ``GraphRun`` input of a start request (also what a schedule runs).

    Raises:
        NotFound, GraphInvalid, ExecutorNotFound, InputInvalid: the graph or input is bad.
    """
    spec = await resolve_graph(body, archive, tenant_id)
    validate_graph(spec, await catalog.get(), max_node_visits=settings.max_node_visits)
    check_graph_mcp_servers(
        spec, stdio_commands=settings.mcp_stdio_commands, policy=outbound_policy(settings)
    )
    validate_run_input(spec, body.input)
    # Servers taken from the input are checked as resolved (the worker checks again).
    check_run_mcp_servers(
        spec,
        {"input": body.input, "context": body.context, "meta": body.meta},
        stdio_commands=settings.mcp_stdio_commands,
        policy=outbound_policy(settings),
    )
    return GraphRunInput(
        graph=spec,
        input=body.input,
        context=body.context,
        meta=body.meta,
        tenant_id=tenant_id,
        user_id=user_id,
        continue_as_new_after_events=settings.continue_as_new_after_events,
        budget=body.budget,
        deadline_seconds=body.deadline_seconds,
        children_policy=body.children_policy,
        # Also set by start_workflow; a scheduled start does not pass there.
        max_live_workstreams=settings.max_live_workstreams,
        expression_workflow_task_steps=settings.expression_workflow_task_steps,
        max_node_visits=settings.max_node_visits,
        shared_state_max_bytes=settings.shared_state_max_bytes,
    )


def run_search_attributes(run_input: GraphRunInput) -> TypedSearchAttributes:
    """The search attributes every run carries: its tenant and graph (see ``access``)."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(TENANT_KEY, run_input.tenant_id),
            SearchAttributePair(GRAPH_KEY, run_input.graph.name),
        ]
    )


def run_memo(run_input: GraphRunInput) -> dict[str, Any]:
    """The memo every run carries: graph, tenant and the user who started it."""
    return {
        "graph": run_input.graph.name,
        "tenant": run_input.tenant_id,
        "user": run_input.user_id,
    }


async def start_run(
    body: StartRunRequest,
    *,
    permit: RunStartPermit,
    tenant_id: str,
    user_id: str | None,
    idempotency_key: str | None,
    temporal: Client,
    archive: RunArchive,
    bus: MessageBus,
    catalog: CatalogCache,
    settings: Settings,
    base_url: str,
    run_control: bool = False,
) -> tuple[StartRunResponse, bool]:
    """Validate, start and record one run.

    Args:
        run_control: the caller holds a run-control role (a conversation's
            ``interrupt`` / ``rollback`` may end another user's run).

    Returns:
        The run's ids and links, and whether a new run was started (False when
        an ``Idempotency-Key`` matched an earlier start).

    Raises:
        NotFound, GraphInvalid, ExecutorNotFound, InputInvalid: before anything
            is started.
        Unavailable: Temporal cannot be reached.
    """
    run_input = await build_run_input(
        body,
        tenant_id=tenant_id,
        user_id=user_id,
        archive=archive,
        catalog=catalog,
        settings=settings,
    )
    workflow_id = new_workflow_id(tenant_id, idempotency_key)
    webhook = None
    if body.webhook is not None:
        # Before the start, so that no event of the run can come before it.
        webhook = await register_webhook(body.webhook, workflow_id, tenant_id, bus, settings)
    if body.conversation_id is not None:
        response, started = await _start_in_conversation(
            body.conversation_id,
            body.if_busy or IfBusy.REJECT,
            temporal=temporal,
            run_input=run_input,
            workflow_id=workflow_id,
            permit=permit,
            archive=archive,
            bus=bus,
            settings=settings,
            base_url=base_url,
            spec=run_input.graph,
            run_control=run_control,
        )
    else:
        response, started = await _start_alone(
            run_input,
            workflow_id,
            permit=permit,
            idempotent=bool(idempotency_key),
            temporal=temporal,
            archive=archive,
            bus=bus,
            settings=settings,
            base_url=base_url,
        )
    return response.model_copy(update={"webhook": webhook}), started


async def _start_alone(
    run_input: GraphRunInput,
    workflow_id: str,
    *,
    permit: RunStartPermit,
    idempotent: bool,
    temporal: Client,
    archive: RunArchive,
    bus: MessageBus,
    settings: Settings,
    base_url: str,
) -> tuple[StartRunResponse, bool]:
    """A run of no conversation: started now (or, for a repeated key, the earlier one)."""
    try:
        handle = await start_workflow(
            temporal, run_input, workflow_id, settings, permit, idempotent=idempotent
        )
    except WorkflowAlreadyStartedError as exc:
        # A retried POST whose run already finished: answer with that run.
        return start_response(settings, base_url, workflow_id, exc.run_id or ""), False
    except RPCError as exc:
        raise temporal_error(exc) from exc
    run_id = handle.result_run_id or handle.first_execution_run_id or ""
    # With USE_EXISTING the server says whether it started a new execution;
    # the SDK keeps that answer only on the handle's start response.
    start_reply = getattr(handle, "_start_workflow_response", None)
    started = bool(getattr(start_reply, "started", True))
    response = start_response(settings, base_url, workflow_id, run_id)
    if started:
        metrics.run_started()
        await record_start(
            archive,
            bus,
            spec=run_input.graph,
            run_input=run_input,
            workflow_id=workflow_id,
            run_id=run_id,
            response=response,
        )
    return response, started


async def start_prepared_run(
    run_input: GraphRunInput,
    *,
    permit: RunStartPermit,
    temporal: Client,
    archive: RunArchive,
    bus: MessageBus,
    settings: Settings,
    base_url: str,
) -> StartRunResponse:
    """Start a run whose ``GraphRunInput`` is built already (a fork of another run)."""
    workflow_id = new_workflow_id(run_input.tenant_id, None)
    response, _ = await _start_alone(
        run_input,
        workflow_id,
        permit=permit,
        idempotent=False,
        temporal=temporal,
        archive=archive,
        bus=bus,
        settings=settings,
        base_url=base_url,
    )
    return response


async def register_webhook(
    requested: RunWebhook, workflow_id: str, tenant_id: str, bus: MessageBus, settings: Settings
) -> WebhookCreated:
    """Check the webhook's URL against the outbound policy and store it for the
    run (``shared.tasks.webhooks``); the secret is generated when not given.

    Raises:
        OutboundRefused: the policy refuses the URL (422 naming ``webhook.url``).
    """
    policy = outbound_policy(settings)
    try:
        await policy.check_registration(requested.url)
    except OutboundRefused as exc:
        reason = (exc.errors[0].get("reason") if exc.errors else None) or exc.detail
        raise OutboundRefused(
            f"webhook.url: {exc.detail}", errors=[{"field": "webhook.url", "reason": reason}]
        ) from exc
    secret = requested.secret or new_secret()
    config = WebhookConfig(
        url=requested.url, tenant_id=tenant_id, signing_secret=secret, events=requested.events
    )
    stored = await Webhooks(bus.redis).register(workflow_id, config)
    # The secret is shown once: only when generated here and stored now.
    shown = secret if stored and requested.secret is None else MASKED_SECRET
    return WebhookCreated(url=requested.url, events=requested.events, secret=shown)


async def _start_in_conversation(
    conversation_id: str,
    if_busy: IfBusy,
    *,
    temporal: Client,
    run_input: GraphRunInput,
    workflow_id: str,
    permit: RunStartPermit,
    archive: RunArchive,
    bus: MessageBus,
    settings: Settings,
    base_url: str,
    spec: GraphSpec,
    run_control: bool = False,
) -> tuple[StartRunResponse, bool]:
    """A run of a conversation: its ``Conversation`` workflow starts it, now or in turn."""
    if permit.tenant_id != run_input.tenant_id:
        raise ValueError("a run start permit is for its own tenant only")
    ack = await submit_to_conversation(
        temporal,
        run_input,
        workflow_id=workflow_id,
        conversation_id=conversation_id,
        if_busy=if_busy,
        settings=settings,
        run_control=run_control,
    )
    queued = ack.state == ConversationRunState.QUEUED
    # The stream does not care for the run id: "latest" until the run has one.
    response = start_response(settings, base_url, workflow_id, ack.run_id or "latest")
    response = response.model_copy(
        update={
            "run_id": ack.run_id or "",
            "conversation_id": conversation_id,
            "state": "queued" if queued else "started",
            "position": ack.position if queued else None,
        }
    )
    metrics.run_started()
    await record_start(
        archive,
        bus,
        spec=spec,
        run_input=run_input,
        workflow_id=workflow_id,
        run_id=ack.run_id or "",
        response=response,
        queued=queued,
        conversation_id=conversation_id,
    )
    return response, True


async def start_workflow(
    temporal: Client,
    run_input: GraphRunInput,
    workflow_id: str,
    settings: Settings,
    permit: RunStartPermit,
    *,
    idempotent: bool,
) -> WorkflowHandle[Any, Any]:
    """Start ``GraphRun`` (the one place runs are started; ``permit`` from ``admit_start``)."""
    if permit.tenant_id != run_input.tenant_id:
        raise ValueError("a run start permit is for its own tenant only")
    run_input = run_input.model_copy(
        update={
            "max_live_workstreams": settings.max_live_workstreams,
            "expression_workflow_task_steps": settings.expression_workflow_task_steps,
            "max_node_visits": settings.max_node_visits,
            "shared_state_max_bytes": settings.shared_state_max_bytes,
        }
    )
    search_attributes = run_search_attributes(run_input)
    if idempotent:
        # Same key → same workflow id: a running run is reused, a closed one is
        # reported (WorkflowAlreadyStartedError) instead of started again.
        conflict = WorkflowIDConflictPolicy.USE_EXISTING
        reuse = WorkflowIDReusePolicy.REJECT_DUPLICATE
    else:
        conflict = WorkflowIDConflictPolicy.FAIL
        reuse = WorkflowIDReusePolicy.ALLOW_DUPLICATE
    return await temporal.start_workflow(
        GRAPH_RUN_WORKFLOW,
        run_input,
        id=workflow_id,
        task_queue=settings.task_queue,
        memo=run_memo(run_input),
        search_attributes=search_attributes,
        id_conflict_policy=conflict,
        id_reuse_policy=reuse,
        static_summary=f"graph {run_input.graph.name}",
        rpc_timeout=RPC_TIMEOUT,
    )


def start_response(
    settings: Settings, base_url: str, workflow_id: str, run_id: str
) -> StartRunResponse:
    run_path = f"{base_url}/runs/{workflow_id}/{run_id}"
    return StartRunResponse(
        workflow_id=workflow_id,
        run_id=run_id,
        stream_url=f"{run_path}/stream",
        updates_url=f"{run_path}/updates",
        status_url=f"{base_url}/runs/{workflow_id}",
        temporal_ui_url=temporal_ui_url(settings, workflow_id),
    )


async def record_start(
    archive: RunArchive,
    bus: MessageBus,
    *,
    spec: GraphSpec,
    run_input: GraphRunInput,
    workflow_id: str,
    run_id: str,
    response: StartRunResponse,
    queued: bool = False,
    conversation_id: str | None = None,
) -> None:
    now = datetime.now(UTC)
    # The request's span started the run: answers and steering join its trace.
    traceparent = current_traceparent()
    record = RunRecord(
        workflow_id=workflow_id,
        run_id=run_id,
        tenant_id=run_input.tenant_id,
        user_id=run_input.user_id,
        graph_name=spec.name,
        status=RunStatus.QUEUED if queued else RunStatus.RUNNING,
        input=run_input.input,
        context=run_input.context,
        created_at=now,
        updated_at=now,
        temporal_ui_url=response.temporal_ui_url,
        trace_id=current_trace_ids().get("traceId") if traceparent else None,
        traceparent=traceparent,
        conversation_id=conversation_id,
        forked_from=(
            run_input.replay.model_dump(mode="json") if run_input.replay is not None else None
        ),
    )
    try:
        if queued:
            # Written only if absent: the run may have started, and recorded its run
            # id and progress, before this line (its conversation's previous run
            # ended meanwhile).
            await archive.update_run(
                workflow_id,
                create_with=record.model_dump(exclude={"workflow_id", "updated_at"}),
                conversation_id=conversation_id,  # also when the run wrote its document first
            )
        else:
            await archive.create_run(record)
    except Exception as exc:
        log.error("run %s started but its archive document was not written: %s", workflow_id, exc)
    try:
        await bus.set_meta(
            workflow_id,
            {
                **({"run_id": run_id} if run_id else {}),
                "tenant_id": run_input.tenant_id,
                "user_id": run_input.user_id or "",
                "graph": spec.name,
                # A queued run's cancel asks its conversation (services.run_control).
                **({"conversation_id": conversation_id} if conversation_id else {}),
            },
        )
    except Exception as exc:
        log.error("run %s started but its stream metadata was not written: %s", workflow_id, exc)
