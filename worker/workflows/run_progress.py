"""What a run has produced so far: its state, its output and its node reports.

The state holds the input, each node's latest output under its id, the last
output under ``_previous``, ``context`` and ``meta`` (docs/design.md §4). Reports
are bounded: the latest ``REPORTS_KEPT`` and counts by status over the whole run
(docs/graphs/long-runs.md); every report is in the archive too.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError, RetryState

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.graph_spec import NodeSpec
    from spindle.shared.contracts.runs import CarriedState, GraphRunInput, NodeReport, NodeStatus
    from spindle.worker.contracts import NodeOutcome, policies
    from spindle.worker.registry import spec_of


class RunProgress:
    """The run's state, output and reports (see the module docstring).

    Args:
        run_input: the run's input (its ``input``, ``context`` and ``meta`` start the state).
    """

    def __init__(self, run_input: GraphRunInput) -> None:
        self.state: dict[str, Any] = {
            "input": run_input.input,
            "context": dict(run_input.context),
            "meta": dict(run_input.meta),
        }
        self.output: Any = None
        self.output_node_ran = False
        # Bounded: one report per node execution would grow without end (docs/design.md §10).
        self.reports: deque[NodeReport] = deque(maxlen=policies.REPORTS_KEPT)
        self.report_counts: dict[str, int] = {}

    def restore(self, carried: CarriedState) -> None:
        """Go on from what the previous generation produced (continue-as-new)."""
        self.state = dict(carried.state)
        self.output, self.output_node_ran = carried.output, carried.output_node_ran
        self.reports.extend(carried.reports)
        self.report_counts = dict(carried.report_counts)

    def add(self, report: NodeReport) -> None:
        """Keep a node report and count it by status."""
        self.reports.append(report)
        self.report_counts[report.status] = self.report_counts.get(report.status, 0) + 1

    def skipped(self, node: NodeSpec, visit: int, reason: str, at: datetime) -> None:
        """A node the scheduler skipped."""
        self.add(
            NodeReport(
                node_id=node.id,
                node_type=node.type,
                status=NodeStatus.SKIPPED,
                visit=visit,
                started_at=at.isoformat(),
                output_summary=f"skipped: {reason}",
            )
        )

    def succeeded(self, node: NodeSpec, visit: int, outcome: NodeOutcome) -> None:
        """A node's output goes into the state (and the run's output) and its report is kept."""
        self.state[node.id] = outcome.output
        self.state["_previous"] = outcome.output
        if outcome.meta:
            self.state["meta"] = {**self.state["meta"], **outcome.meta}
        spec = spec_of(node.type)
        if spec is not None and spec.sets_run_output:
            self.output, self.output_node_ran = outcome.output, True
        elif not self.output_node_ran:
            self.output = outcome.output
        self.add(outcome.report.model_copy(update={"visit": visit}))

    def failed(
        self, node: NodeSpec, visit: int, error: BaseException | None, started: datetime
    ) -> str:
        """Report a node that failed after its retries; returns the run's error message."""
        cause: BaseException | None = error
        attempt = 1
        if isinstance(error, ActivityError):
            cause = error.cause or error
            if error.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
                base = policies.type_retry(spec_of(node.type))
                attempt = policies.node_retry(node, base).maximum_attempts
        text = cause.message if isinstance(cause, FailureError) else str(cause)
        self.add(
            NodeReport(
                node_id=node.id,
                node_type=node.type,
                status=NodeStatus.FAILED,
                attempt=attempt,
                visit=visit,
                started_at=started.isoformat(),
                duration_ms=(workflow.now() - started).total_seconds() * 1000,
                error=text,
            )
        )
        return f"node '{node.id}' ({node.type}) failed: {text}"
