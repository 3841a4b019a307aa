"""One log line when a node's activity starts and one when it finishes (seed 001).

An activity interceptor, so every activity that runs a node's work — ``execute_node``,
an agent's ``llm_turn`` / ``tool_call``, a map's ``plan_items`` / ``run_item_batch`` /
``collect_items``, a prompt's activities — logs the same two lines without each
activity remembering to. The node is the one its input names (a ``NodeExecution``,
or an input with an ``execution``). Activities that serve no node log nothing here.

In JSON (docs/operations/observability.md#logs) each line carries ``event``
(``node_started`` / ``node_finished``), ``runId`` (the workflow id), ``nodeId``,
``nodeType``, ``attempt``, ``visit``, ``activity`` (its type), ``activityId``,
``temporalRunId`` and, with tracing on, the ``traceId`` / ``spanId`` of the
activity's span; a finish line adds ``status`` (``ok`` / ``failed``),
``durationMs`` and, on failure, ``error`` (the exception type).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from spindle.shared.platform.logging_setup import bind_log_context
from spindle.worker.contracts import NodeExecution

logger = logging.getLogger("spindle.worker.nodes")


def node_of(args: Any) -> NodeExecution | None:
    """The node execution an activity's arguments name, if any."""
    for arg in args:
        if isinstance(arg, NodeExecution):
            return arg
        execution = getattr(arg, "execution", None)
        if isinstance(execution, NodeExecution):
            return execution
    return None


class NodeLogInterceptor(Interceptor):
    """Adds the start/finish lines to every node activity of a worker."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _NodeLogInbound(next)


class _NodeLogInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        execution = node_of(input.args)
        if execution is None:
            return await self.next.execute_activity(input)
        info = activity.info()
        node = execution.node
        fields = {
            "visit": execution.visit,
            "activity": info.activity_type,
            "activityId": info.activity_id,
            "temporalRunId": info.workflow_run_id,
        }
        bind_log_context(
            run_id=info.workflow_id, node_id=node.id, node_type=node.type, attempt=info.attempt
        )
        what = f"node {node.id} ({node.type}) {info.activity_type}"
        logger.info(
            "%s started, attempt %d",
            what,
            info.attempt,
            extra={"fields": _event("node_started", fields)},
        )
        started = time.monotonic()
        try:
            result = await self.next.execute_activity(input)
        except BaseException as exc:
            self._finished(execution, info, fields, started, type(exc).__name__)
            raise
        self._finished(execution, info, fields, started, None)
        return result

    @staticmethod
    def _finished(
        execution: NodeExecution,
        info: activity.Info,
        fields: dict[str, Any],
        started: float,
        error: str | None,
    ) -> None:
        node = execution.node
        # The activity may have bound its own context meanwhile: the ids are the node's.
        bind_log_context(
            run_id=info.workflow_id, node_id=node.id, node_type=node.type, attempt=info.attempt
        )
        finish = {
            **fields,
            "status": "failed" if error else "ok",
            "durationMs": round((time.monotonic() - started) * 1000, 1),
        }
        if error:
            finish["error"] = error
        what = f"node {node.id} ({node.type}) {info.activity_type}"
        logger.log(
            logging.WARNING if error else logging.INFO,
            "%s %s, attempt %d",
            what,
            f"failed ({error})" if error else "finished",
            info.attempt,
            extra={"fields": _event("node_finished", finish)},
        )


def _event(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"event": name, **fields}
