"""Small pieces the tests of the run's collaborators build runs from (no workflow)."""

from __future__ import annotations

from typing import Any

from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import GraphRunInput, NodeReport, NodeStatus
from spindle.shared.graphs.structure import parse_graph, validate_structure
from spindle.worker.contracts import NodeOutcome, RunRef

RUN = RunRef(workflow_id="wf-1", run_id="run-1", stream_id="wf-1", graph_name="g")


def two_node_graph() -> GraphSpec:
    spec = parse_graph(
        {
            "name": "g",
            "entry": "fetch",
            "nodes": [
                {"id": "fetch", "type": "tool", "params": {"tool": "echo"}},
                {"id": "done", "type": "output"},
            ],
            "edges": [{"from": "fetch", "to": "done"}],
        }
    )
    validate_structure(spec)
    return spec


def run_input(**fields: Any) -> GraphRunInput:
    return GraphRunInput(graph=two_node_graph(), input={"q": 1}, meta={"m": 0}, **fields)


def outcome(node_id: str, output: Any, meta: dict[str, Any] | None = None) -> NodeOutcome:
    report = NodeReport(
        node_id=node_id, node_type="tool", status=NodeStatus.SUCCESS, started_at="t0"
    )
    return NodeOutcome(output=output, meta=meta or {}, report=report)


async def no_notice(text: str, details: dict[str, Any] | None = None) -> None:
    raise AssertionError(f"no notice expected: {text}")
