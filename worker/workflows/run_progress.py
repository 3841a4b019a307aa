"""What a run has produced so far: its state, its output and its node reports.

The state holds the input, each node's latest output under its id, the last
output under ``_previous``, ``context`` and ``meta`` (docs/design.md §4), and the
graph's shared state under ``state`` when it declares one: nodes' writes to it
and to ``context`` are applied here, bounded (docs/graphs/index.md#shared-state). Reports
are bounded: the latest ``REPORTS_KEPT`` and counts by status over the whole run
(docs/graphs/long-runs.md); every report is in the archive too. The activities
archive the reports of the nodes they run; the reports the workflow makes itself
(a node skipped, a fork's node reused, a ``workstream`` node) are kept here, the
latest of each node (bounded by the graph), and ``finish_run`` archives them.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError, RetryState

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.envelope import SHARED_STATE_MAX_BYTES
    from spindle.shared.contracts.graph_spec import SHARED_STATE_KEY, NodeSpec
    from spindle.shared.contracts.runs import CarriedState, GraphRunInput, NodeReport, NodeStatus
    from spindle.shared.contracts.workstreams import WorkstreamList
    from spindle.shared.graphs.node_types import RunKind
    from spindle.worker.contracts import NodeOutcome, policies
    from spindle.worker.contracts.shared_state import applied
    from spindle.worker.registry import spec_of


def spec_runs(node: NodeSpec) -> RunKind | None:
    """How the node's type runs (None: a type this worker does not know)."""
    spec = spec_of(node.type)
    return spec.runs if spec is not None else None


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
        self._writable = run_input.graph.writable
        if run_input.graph.state is not None:
            self.state[SHARED_STATE_KEY] = {}
        self._max_bytes = run_input.shared_state_max_bytes or SHARED_STATE_MAX_BYTES
        self.output: Any = None
        self.output_node_ran = False
        # Bounded: one report per node execution would grow without end (docs/design.md §10).
        self.reports: deque[NodeReport] = deque(maxlen=policies.REPORTS_KEPT)
        self.report_counts: dict[str, int] = {}
        # The latest workflow-made report of each node: finish_run archives them.
        self.decided: dict[str, NodeReport] = {}

    def restore(self, carried: CarriedState) -> None:
        """Go on from what the previous generation produced (continue-as-new)."""
        self.state = dict(carried.state)
        self.output, self.output_node_ran = carried.output, carried.output_node_ran
        self.reports.extend(carried.reports)
        self.report_counts = dict(carried.report_counts)
        self.decided = {report.node_id: report for report in carried.decided}

    def add(self, report: NodeReport) -> None:
        """Keep a node report and count it by status."""
        self.reports.append(report)
        self.report_counts[report.status] = self.report_counts.get(report.status, 0) + 1

    def skipped(self, node: NodeSpec, visit: int, reason: str, at: datetime) -> None:
        """A node the scheduler skipped."""
        report = NodeReport(
            node_id=node.id,
            node_type=node.type,
            status=NodeStatus.SKIPPED,
            visit=visit,
            started_at=at.isoformat(),
            output_summary=f"skipped: {reason}",
        )
        self.add(report)
        self.decided[node.id] = report

    def _writes(self, node: NodeSpec, outcome: NodeOutcome) -> dict[str, Any]:
        """The node's writes to shared state and context, applied to copies.

        Raises:
            StateWriteRefused: a key not writable, or past ``shared_state_max_bytes``.
        """
        changed: dict[str, Any] = {}
        if outcome.state is not None and not outcome.state.empty():
            allowed = self._writable
            if node.writes is not None:
                allowed = allowed & frozenset(node.writes)
            current = self.state.get(SHARED_STATE_KEY)
            changed[SHARED_STATE_KEY] = applied(
                current if isinstance(current, dict) else {},
                outcome.state,
                what="state",
                allowed=allowed,
                max_bytes=self._max_bytes,
            )
        if outcome.context is not None and not outcome.context.empty():
            context = self.state.get("context")
            changed["context"] = applied(
                context if isinstance(context, dict) else {},
                outcome.context,
                what="context",
                allowed=None,
                max_bytes=self._max_bytes,
            )
        return changed

    def succeeded(self, node: NodeSpec, visit: int, outcome: NodeOutcome) -> None:
        """A node's output goes into the state (and the run's output) and its report is kept.

        Raises:
            StateWriteRefused: its writes were refused (nothing of it is kept).
        """
        self.state.update(self._writes(node, outcome))
        self.state[node.id] = outcome.output
        self.state["_previous"] = outcome.output
        if outcome.meta:
            self.state["meta"] = {**self.state["meta"], **outcome.meta}
        spec = spec_of(node.type)
        if spec is not None and spec.sets_run_output:
            self.output, self.output_node_ran = outcome.output, True
        elif not self.output_node_ran:
            self.output = outcome.output
        report = outcome.report.model_copy(update={"visit": visit})
        workstream = spec_runs(node) is RunKind.WORKSTREAM
        if workstream and isinstance(outcome.output, dict) and "state" in outcome.output:
            # ``wait: true``: the output is the child's outcome, its state final.
            report = report.model_copy(update={"child_state": str(outcome.output["state"])})
        self.add(report)
        if report.status is NodeStatus.REUSED or workstream:
            self.decided[node.id] = report  # no activity archived it

    def decided_reports(self, children: WorkstreamList) -> list[NodeReport]:
        """The workflow-made reports to archive, a workstream node's with its child's
        state now (the child its output's ``launch_id`` names)."""
        states = {child.launch_id: child.state.value for child in children.workstreams}
        reports = []
        for node_id, decided in self.decided.items():
            launch = self.state.get(node_id)
            launch_id = launch.get("launch_id") if isinstance(launch, dict) else None
            state = states.get(launch_id) if isinstance(launch_id, str) else None
            if state is not None and decided.status is NodeStatus.SUCCESS:
                decided = decided.model_copy(update={"child_state": state})  # noqa: PLW2901
            reports.append(decided)
        return reports

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
        report = NodeReport(
            node_id=node.id,
            node_type=node.type,
            status=NodeStatus.FAILED,
            attempt=attempt,
            visit=visit,
            started_at=started.isoformat(),
            duration_ms=(workflow.now() - started).total_seconds() * 1000,
            error=text,
        )
        self.add(report)
        if not isinstance(error, ActivityError):
            # Failed in the workflow (max_turns, an expression budget, a refused step):
            # no activity archived its report, so the run's end does.
            self.decided[node.id] = report
        return f"node '{node.id}' ({node.type}) failed: {text}"
