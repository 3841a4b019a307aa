"""Spindle's MCP server: each registered graph of the caller's tenant is a tool.

Built on the official ``mcp`` SDK's low-level ``Server`` (the SDK parses, validates
and serializes the protocol; these handlers only map it onto runs), served over
streamable HTTP at ``/mcp`` by ``spindle.gateway.protocols.mcp.endpoint``, which
authenticates the caller like every other route and puts a ``Caller`` in the
request scope (docs/protocols/mcp.md).

- ``tools/list``: the tenant's registered graphs, each with its ``input_schema``
  (an open object when the graph has none);
- ``tools/call``: starts a run of the graph through ``services.run_starts`` and
  ``start_run`` (the same limits and validation as ``POST /runs``), reports the
  run's progress messages as ``notifications/progress`` and returns its output;
- a HITL prompt in the run (REQUEST_INPUT) becomes an elicitation with the
  prompt's ``ui_schema``: an ``elicitation/create`` request on a connection that
  can carry one, otherwise (2026-07-28 protocol) an ``InputRequiredResult`` whose
  ``request_state`` names the run; the answer is delivered with ``signal_run``
  and the run is followed on;
- a ``tools/call`` with ``task`` (MCP Tasks) is taken before this module by
  ``spindle.gateway.protocols.mcp.tasks``, which reuses ``start``, ``elicit`` and
  ``run_result``; every tool says ``execution.taskSupport: optional``;
- following a run holds one of the tenant's stream slots (``run_streams.take_slot``),
  taken before the run starts: a call refused at ``max_streams_per_tenant`` starts nothing.

An unknown graph (another tenant's included: 404-not-403 here too) is a protocol
error (``-32602``), as is a malformed request (the SDK's). Arguments that break
the graph's input schema are a tool execution error instead (MCP 2025-11-25,
SEP-1303): a ``CallToolResult`` with ``isError: true`` whose text names each
problem, so the model can correct its call; no run starts either way.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
import orjson
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from spindle.gateway.limits.tenant_limits import StreamLease
from spindle.gateway.models import RunDetail, StartRunRequest
from spindle.gateway.protocols.a2a.run_follower import RunFollower
from spindle.gateway.protocols.a2a.spindle_call import CLOSE_WAIT
from spindle.gateway.protocols.a2a.task_mapping import (
    PROGRESS_TYPES,
    IdleWatch,
    asks_for_input,
    status_text,
)
from spindle.gateway.protocols.mcp.conversation import converse
from spindle.gateway.runs.access import RunAction
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_input import RunSignal, signal_run
from spindle.gateway.services.run_starts import graph_is_registered, start_run
from spindle.gateway.services.run_streams import RunFollow, run_follower, take_slot
from spindle.gateway.services.run_views import RunLookup, authorize, await_close, describe_run
from spindle.shared.contracts.errors import (
    Conflict,
    NotFound,
    RateLimited,
    SpindleError,
    ValidationFailed,
)
from spindle.shared.contracts.messages import CompactMessage
from spindle.shared.contracts.runs import RunStatus, UserInput

log = logging.getLogger(__name__)

SCOPE_KEY = "spindle.mcp"
ANSWER_KEY = "answer"
OPEN_OBJECT: dict[str, Any] = {"type": "object"}
TOOL_EXECUTION = types.ToolExecution(task_support="optional")


Context = ServerRequestContext[dict[str, Any], Any]


def caller_of(ctx: Context) -> Caller:
    request = ctx.request
    caller = request.scope.get(SCOPE_KEY) if request is not None else None
    if not isinstance(caller, Caller):  # the endpoint always sets it
        raise MCPError(code=types.INTERNAL_ERROR, message="no caller on the MCP request")
    return caller


def _invalid(message: str, data: Any = None) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message, data=data)


async def list_tools(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    """The caller's tenant's registered graphs as tools."""
    caller = caller_of(ctx)
    specs = await caller.state.archive.list_graphs(tenant_id=caller.identity.tenant_id)
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=spec.name,
                description=spec.description or f"Run the graph '{spec.name}'",
                input_schema=spec.input_schema or OPEN_OBJECT,
                # A graph run may take minutes: a client may call it as a task
                # (spindle.gateway.protocols.mcp.tasks) and come back for the result.
                execution=TOOL_EXECUTION,
            )
            for spec in specs
        ]
    )


async def call_tool(
    ctx: Context, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    """Start (or, with ``request_state``, answer and resume) a run and follow it."""
    caller = caller_of(ctx)
    if params.request_state is not None:
        workflow_id, answer = await _answer(caller, params)
        return await _follow(ctx, caller, workflow_id, from_now=True, answer=answer)
    # The slot first: a call refused at the stream cap must not have started its run.
    lease = await _slot(caller)
    try:
        started = await start(caller, params)
    except BaseException:
        await lease.release()
        raise
    if isinstance(started, types.CallToolResult):  # refused arguments: nothing started
        await lease.release()
        return started
    return await _follow(ctx, caller, started, from_now=False, lease=lease)


async def _slot(caller: Caller) -> StreamLease:
    try:
        return await take_slot(caller)
    except SpindleError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=exc.detail) from exc


def _input_refused(name: str, exc: ValidationFailed) -> types.CallToolResult:
    """Arguments the graph's input schema refuses, as a tool execution error (SEP-1303)."""
    lines = [f"invalid arguments for tool '{name}': {exc.detail}"]
    for error in exc.errors or []:
        field = error.get("field") or "(arguments)"
        lines.append(f"- {field}: {error.get('message') or error.get('rule') or 'invalid'}")
    return types.CallToolResult(
        content=[types.TextContent(text="\n".join(lines))],
        is_error=True,
        _meta={"spindle/errors": exc.errors or []},
    )


async def start(caller: Caller, params: types.CallToolRequestParams) -> str | types.CallToolResult:
    """The started run's workflow id, or the tool error of arguments the graph refuses."""
    if not await graph_is_registered(caller, params.name):
        raise _invalid(f"unknown tool '{params.name}' (no graph of that name is registered)")
    try:
        request = StartRunRequest(graph=params.name, input=params.arguments or {})
        started, _ = await start_run(caller, request)
    except ValidationFailed as exc:
        return _input_refused(params.name, exc)
    except NotFound as exc:
        raise _invalid(exc.detail) from exc
    except RateLimited as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=exc.detail) from exc
    except SpindleError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=exc.detail) from exc
    return started.workflow_id


def _run_of_state(request_state: str) -> str:
    try:
        data = orjson.loads(request_state)
        workflow_id = data["run"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise _invalid("requestState is not one this server issued") from exc
    if not isinstance(workflow_id, str):
        raise _invalid("requestState is not one this server issued")
    return workflow_id


async def _answer(
    caller: Caller, params: types.CallToolRequestParams
) -> tuple[str, types.ElicitResult]:
    """The run named by ``request_state`` (if the caller may answer it) and the answer."""
    workflow_id = _run_of_state(params.request_state or "")
    response = (params.input_responses or {}).get(ANSWER_KEY)
    if not isinstance(response, types.ElicitResult):
        raise _invalid(f"inputResponses.{ANSWER_KEY}: the elicitation's result is missing")
    try:
        # Another tenant's run is not found, as an unknown one would be.
        await authorize(caller, workflow_id, RunAction.CONTROL)
    except NotFound as exc:
        raise _invalid(f"run '{workflow_id}' was not found") from exc
    except SpindleError as exc:
        raise _invalid(exc.detail) from exc
    return workflow_id, response


async def _deliver(caller: Caller, workflow_id: str, response: types.ElicitResult) -> None:
    """The elicitation's result as the run's ``UserInput``.

    Raises:
        MCPError: declined or cancelled (the run keeps waiting), or refused.
    """
    if response.action != "accept":
        raise _invalid(
            f"the input was not given ({response.action}): run '{workflow_id}' keeps waiting for it"
        )
    signal = RunSignal(workflow_id=workflow_id, input=UserInput(data=dict(response.content or {})))
    try:
        await signal_run(caller, signal)
    except (ValidationFailed, Conflict) as exc:
        raise _invalid(exc.detail, {"errors": getattr(exc, "errors", None)}) from exc
    except SpindleError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=exc.detail) from exc


def _follower(caller: Caller, workflow_id: str, *, from_now: bool) -> RunFollower:
    follow = RunFollow(workflow_id=workflow_id, live_only=from_now)
    return RunFollower(run_follower(caller, follow))


async def _follow(
    ctx: Context,
    caller: Caller,
    workflow_id: str,
    *,
    from_now: bool,
    answer: types.ElicitResult | None = None,
    lease: StreamLease | None = None,
) -> types.CallToolResult | types.InputRequiredResult:
    """Report the run's progress until it ends or asks for input (under a stream slot).

    Args:
        from_now: follow only messages posted from now on (a resumed call).
        answer: delivered once the follower listens, so no message the run posts
            after it (its end included) can be missed.
        lease: the stream slot taken before the run was started (else one is taken).
    """
    if lease is None:
        lease = await _slot(caller)
    try:
        step = 0
        async with _follower(caller, workflow_id, from_now=from_now) as follower:
            if answer is not None:
                await _deliver(caller, workflow_id, answer)
            idle = IdleWatch(after_send=from_now)
            async for message in follower.messages():
                if asks_for_input(message):
                    asked = await elicit(ctx, caller, workflow_id, message)
                    if asked is not None:
                        return asked
                    continue
                waiting = idle.event(workflow_id, message)
                if waiting is not None:  # an interactive agent answered and waits
                    await converse(ctx, caller, workflow_id, status_text(waiting))
                    continue
                if message.ends_conversation:
                    return await run_result(caller, workflow_id, message)
                if message.t in PROGRESS_TYPES and message.m:
                    step += 1
                    await ctx.session.report_progress(step, None, message.m)
                    await lease.refresh()
        return await run_result(caller, workflow_id, None)
    finally:
        await lease.release()


async def elicit(
    ctx: Context, caller: Caller, workflow_id: str, message: CompactMessage
) -> types.InputRequiredResult | None:
    """Ask the client for the prompt's answer.

    Returns:
        None once the answer was delivered inline (the run goes on), or the
        ``InputRequiredResult`` the client answers by calling again.
    """
    details = message.d if isinstance(message.d, dict) else {}
    schema = details.get("ui_schema") or {"type": "object", "properties": {}}
    text = message.m or str(details.get("prompt") or "Input required")
    if ctx.session.can_send_request:
        result = await ctx.session.elicit_form(text, schema, related_request_id=ctx.request_id)
        await _deliver(caller, workflow_id, result)
        return None
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=text, requested_schema=schema)
    )
    return types.InputRequiredResult(
        input_requests={ANSWER_KEY: request},
        request_state=orjson.dumps({"run": workflow_id}).decode(),
    )


async def run_result(
    caller: Caller, workflow_id: str, last: CompactMessage | None
) -> types.CallToolResult:
    """The run's output (or its error) once Temporal reports it closed."""
    # A run failed, cancelled, terminated or not closed in time is described as it is.
    if not await await_close(caller, workflow_id, CLOSE_WAIT.total_seconds()):
        log.debug("mcp: run %s did not close within %s", workflow_id, CLOSE_WAIT)
    detail = await describe_run(caller, RunLookup(workflow_id=workflow_id))
    return _tool_result(detail, last)


def _tool_result(detail: RunDetail, last: CompactMessage | None) -> types.CallToolResult:
    meta = {"spindle/run": detail.workflow_id, "spindle/status": detail.status}
    if detail.status != RunStatus.COMPLETED:
        reason = detail.error or (last.m if last is not None else None) or detail.status
        return types.CallToolResult(
            content=[types.TextContent(text=f"run {detail.workflow_id} {detail.status}: {reason}")],
            is_error=True,
            _meta=meta,
        )
    output = detail.output
    text = output if isinstance(output, str) else orjson.dumps(output, default=str).decode()
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=output if isinstance(output, dict) else None,
        _meta=meta,
    )
