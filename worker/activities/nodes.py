"""``execute_node``: run one node of a registered type (tool, router, output, custom).

One node execution is one activity: its messages and its archive writes happen
inside it, not in extra activities.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from dataclasses import dataclass
from typing import Any

from temporalio import activity

from spindle.shared.contracts.errors import (
    ExecutorNotFound,
    PayloadInvalid,
    to_application_error,
)
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.runs import NodeStatus
from spindle.shared.graphs.expressions import EvaluationBudget
from spindle.shared.graphs.node_types import TOOL
from spindle.shared.platform import metrics
from spindle.shared.platform.logging_setup import bind_activity_log_context
from spindle.worker.activities.call_replay import recording_calls
from spindle.worker.activities.heartbeat import heartbeating
from spindle.worker.activities.recorder import (
    NodeStartRecord,
    build_report,
    input_envelope,
    output_envelope,
)
from spindle.worker.activities.run_activities import RunActivities
from spindle.worker.contracts import EXECUTE_NODE, NodeExecution, NodeOutcome
from spindle.worker.contracts.envelope import NodeMessage
from spindle.worker.contracts.param_resolution import (
    has_expressions,
    node_budget,
    off_loop,
    resolve_params,
    validate_params,
)
from spindle.worker.contracts.payload_schemas import check_inputs, check_output
from spindle.worker.posting.poster import MessagePoster
from spindle.worker.registry import (
    ClosingPost,
    NodeContext,
    NodeResult,
    NodeType,
    get_node_type,
)

logger = logging.getLogger(__name__)


_warned_raw_types: set[str] = set()


def as_node_result(value: Any, node_type: str) -> NodeResult:
    """A node's return value as a NodeResult.

    A bare value is a legacy raw output (seed 000): it becomes the payload of the
    node's NodeMessage envelope, with a deprecation warning logged once per node
    type per process; a NodeMessage envelope contributes its payload and port.
    """
    if isinstance(value, NodeResult):
        return value
    if isinstance(value, NodeMessage):
        return NodeResult(
            data=value.payload,
            ports=[value.from_port] if value.from_port else [],
            state=value.state_updates,
            context=value.context_updates,
        )
    if node_type not in _warned_raw_types:
        _warned_raw_types.add(node_type)
        message = (
            f"node type {node_type!r} returned a raw {type(value).__name__}; wrapping it in a "
            "NodeMessage envelope. Raw node outputs are deprecated: return NodeResult(data=...)"
        )
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        logger.warning(message)
    return NodeResult(data=value)


async def confirm_current(poster: MessagePoster, closing: ClosingPost | None) -> None:
    """Post the node's closing message, or check that this attempt is still current.

    Either way the attempt's fence is checked after the node's last effect: a post
    checks and claims it first in the same script (even on an ended stream), one
    round trip for both.

    Raises:
        ApplicationError: ``AttemptSuperseded`` (see ``MessagePoster.check_current``).
    """
    if closing is None:
        await poster.check_current()
    else:
        await poster.post(closing.type, closing.text, details=closing.details)


class NodeActivities(RunActivities):
    """The generic node activity, with its I/O dependencies and settings injected.

    Args:
        bus: where the node's messages go.
        archive: where its report is archived (None: nowhere).
        settings: the worker's settings.
    """

    @activity.defn(name=EXECUTE_NODE)
    async def execute_node(self, execution: NodeExecution) -> NodeOutcome:
        """Resolve params, run the node type's implementation, report and archive."""
        node = execution.node
        bind_activity_log_context(node_id=node.id, node_type=node.type)
        started = time.monotonic()
        poster = self._poster(execution.run)
        await poster.announce_retry(f"node {node.id}")
        node_type = registered_type(node)
        # One expression budget for everything this execution evaluates: its params
        # here, then its filter items, routes or templates (docs/graphs/index.md).
        budget = node_budget(node.id, self.settings.expression_node_steps)
        if has_expressions(node, node_type.templates):
            raw_params, ctx = await off_loop(node_context, execution, node_type, poster, budget)
        else:
            raw_params, ctx = node_context(execution, node_type, poster, budget)
        envelope_in = input_envelope(execution, raw_params)
        await self.tasks.node_started(execution)
        recording_start = NodeStartRecord(self.recorder, execution)
        try:
            check_inputs(node, ctx.inputs)  # its input_schema (docs/graphs/index.md)
            # A tool node's call is recorded, or replayed in a recorded fork (call_replay).
            with recording_calls(self.calls) as calls:
                async with heartbeating(node.id):
                    value = await node_type.run(ctx)
            # Bytes in the output are stored as run files, referenced under ``binary``.
            result = await self.attachments.referenced(execution, as_node_result(value, node.type))
            check_output(node, result.data)
        except asyncio.CancelledError:
            recording_start.cancel()
            raise
        except Exception as exc:
            failure = _Failure(poster, recording_start, envelope_in, started)
            await self._record_failure(execution, failure, exc)
            if isinstance(exc, PayloadInvalid):  # the same data fails every attempt
                raise to_application_error(exc) from exc
            raise

        report = build_report(
            execution,
            NodeStatus.SUCCESS,
            duration_ms=(time.monotonic() - started) * 1000,
            output=result.data,
        )
        await confirm_current(poster, result.closing)
        start_recorded = await recording_start.settle()
        finished = self.recorder.finished(
            execution,
            report,
            input=envelope_in,
            output=output_envelope(
                execution,
                result.data,
                ports=result.ports,
                meta=result.metadata,
                updates=(result.state, result.context),
            ),
            current=not start_recorded,
        )
        # One Redis push: the archiver writes it to MongoDB off the node's path.
        await self.recorder.archive_later(finished, poster.archive_op(), *calls.ops)
        if node.type == TOOL.name and not calls.hits:  # a tool call for the spend metrics
            metrics.tool_called(execution.run.tenant_id, execution.run.graph_name)
        await self.tasks.node_finished(execution, result.data)
        return NodeOutcome(
            output=result.data,
            ports=result.ports,
            meta=result.metadata,
            report=report,
            state=result.state,
            context=result.context,
        )

    async def _record_failure(
        self, execution: NodeExecution, failure: _Failure, exc: Exception
    ) -> None:
        """Report and archive a node whose implementation raised ``exc``."""
        error = f"{type(exc).__name__}: {exc}"
        report = build_report(
            execution,
            NodeStatus.FAILED,
            duration_ms=(time.monotonic() - failure.started) * 1000,
            error=error,
        )
        # The last attempt's report wins (same archive id per node visit); an
        # attempt a newer one has superseded records nothing.
        await failure.poster.check_current()
        start_recorded = await failure.recording_start.settle()
        finished = self.recorder.finished(
            execution,
            report,
            input=failure.envelope_in,
            output=output_envelope(execution, None, error=error),
            current=not start_recorded,
        )
        await self.recorder.archive_later(finished, failure.poster.archive_op())


@dataclass(frozen=True)
class _Failure:
    """What ``execute_node`` had under way when its node raised."""

    poster: MessagePoster
    recording_start: NodeStartRecord
    envelope_in: NodeMessage
    started: float


def registered_type(node: NodeSpec) -> NodeType:
    """The node type ``node`` names.

    Raises:
        ApplicationError: ``ExecutorNotFound`` naming the node and its type.
    """
    try:
        return get_node_type(node.type)
    except ExecutorNotFound as exc:
        raise to_application_error(
            ExecutorNotFound(exc.detail, context={"node": node.id, "type": node.type})
        ) from exc


def node_context(
    execution: NodeExecution,
    node_type: NodeType,
    poster: MessagePoster,
    budget: EvaluationBudget,
) -> tuple[dict[str, Any], NodeContext]:
    """The node's resolved params (before validation) and the context it runs with.

    ``budget`` is the execution's expression budget: its params spend from it first,
    and the context hands the rest to the node (``NodeContext.expressions``).

    Raises:
        ApplicationError: ``InvalidParams`` when the params do not resolve or validate;
            ``ExpressionBudgetSpent`` when their evaluation spends ``budget``.
    """
    node = execution.node
    raw_params = resolve_params(node, execution.state, templates=node_type.templates, budget=budget)
    params: Any = raw_params
    if node_type.params is not None:
        params = validate_params(node, raw_params, node_type.params)
    ctx = NodeContext(
        node=node,
        params=params,
        state=execution.state,
        run=execution.run,
        poster=poster,
        visit=execution.visit,
        expressions=budget,
        inputs=[envelope.resolved(execution.state) for envelope in execution.inputs],
    )
    return raw_params, ctx
