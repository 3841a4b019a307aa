"""Issue 32 points 1-3 on ``GraphRun``: envelopes flow between nodes (from, to,
toPort, a bounded trace, meta), nodes read them by port, write shared state and
context (declared keys, bounded, carried across continue-as-new), and payload
schemas fail the node naming the field (docs/graphs/envelopes.md, index.md)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from spindle.gateway.api.routes.run_view import inspect_node
from spindle.nodes import NodeContext, NodeResult, node_type
from spindle.shared.contracts.envelope import TRACE_STEPS_KEPT, StateUpdate
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
)
from spindle.shared.graphs.structure import parse_graph, validate_structure
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

SUFFIX = uuid.uuid4().hex[:6]
PASS = f"env_pass_{SUFFIX}"
JOIN = f"env_join_{SUFFIX}"
COUNT = f"env_count_{SUFFIX}"
REPORT = f"env_report_{SUFFIX}"
WRITE = f"env_write_{SUFFIX}"


def _seen(message: Any) -> dict[str, Any]:
    return {
        "from": message.from_,
        "to": message.to,
        "fromPort": message.from_port,
        "toPort": message.to_port,
        "payload": message.payload,
        "trace": [step.node_id for step in message.trace],
        "traceCount": message.trace_count,
        "nodeType": message.meta.node_type,
        "role": message.meta.role,
        "startTime": message.meta.start_time,
        "lastNode": message.meta.last_node,
    }


@node_type(PASS)
async def env_pass(ctx: NodeContext) -> NodeResult:
    """Passes on what arrived, tagged with its own id."""
    arrived = ctx.input()
    return NodeResult(data={"by": ctx.node.id, "got": _seen(arrived) if arrived else None})


@node_type(JOIN)
async def env_join(ctx: NodeContext) -> NodeResult:
    """Reads its two input ports."""
    left, right = ctx.input("left"), ctx.input("right")
    assert left is not None and right is not None
    payload = ctx.execution_payload()
    return NodeResult(
        data={
            "left": _seen(left),
            "right": _seen(right),
            "count": len(ctx.inputs),
            "payload_meta": payload.meta.model_dump(by_alias=True),
        }
    )


@node_type(COUNT)
async def env_count(ctx: NodeContext) -> NodeResult:
    """Adds one to ``state.count``, logs in ``state.log``, notes ``context.last``."""
    count = int(ctx.shared_state.get("count", 0)) + 1
    return NodeResult(
        data=count,
        state=StateUpdate(set={"count": count}, merge={"log": {"last": count}}),
        context=StateUpdate(set={"last": count}),
    )


@node_type(REPORT)
async def env_report(ctx: NodeContext) -> NodeResult:
    """What shared state and context hold now."""
    return NodeResult(data={"state": ctx.shared_state, "context": ctx.context})


@node_type(WRITE)
async def env_write(ctx: NodeContext) -> NodeResult:
    """Writes what its params say (``key``, ``value``) to shared state."""
    return NodeResult(data=None, state=StateUpdate(set={ctx.params["key"]: ctx.params["value"]}))


def graph(name: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]], **extra: Any):  # type: ignore[no-untyped-def]
    spec = parse_graph(
        {"name": name, "entry": nodes[0]["id"], "nodes": nodes, "edges": edges, **extra}
    )
    validate_structure(spec)
    return spec


async def test_envelopes_flow_with_senders_ports_trace_and_meta(runner: GraphRunner) -> None:
    spec = graph(
        "envelopes",
        [
            {"id": "start", "type": PASS},
            {"id": "a", "type": PASS},
            {"id": "b", "type": PASS},
            {"id": "join", "type": JOIN},
        ],
        [
            {"from": "start", "to": "a"},
            {"from": "start", "to": "b"},
            {"from": "a", "to": "join", "to_port": "left"},
            {"from": "b", "to": "join", "to_port": "right"},
        ],
    )
    handle = await runner.start(spec, {"text": "hi"})
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    start = await runner.archive.node_reports(handle.id)
    by_node = {r["node_id"]: r for r in start}

    # The entry node's envelope comes from the run input, sent by the user.
    entry_got = by_node["start"]["output"]["payload"]["got"]
    assert entry_got["from"] == "input" and entry_got["to"] == "start"
    assert entry_got["payload"] == {"text": "hi"} and entry_got["role"] == "user"
    # A real upstream node, not "_previous"; the edge's port and a trace of the path.
    a_got = by_node["a"]["output"]["payload"]["got"]
    assert a_got["from"] == "start" and a_got["to"] == "a" and a_got["toPort"] is None
    assert a_got["trace"] == ["input", "start"] and a_got["traceCount"] == 2
    assert a_got["nodeType"] == PASS and a_got["role"] == "system"
    assert a_got["payload"]["by"] == "start"
    assert a_got["startTime"] == entry_got["startTime"] and a_got["startTime"]

    out = result.output
    assert out["count"] == 2
    assert out["left"]["from"] == "a" and out["left"]["toPort"] == "left"
    assert out["right"]["from"] == "b" and out["right"]["toPort"] == "right"
    assert out["left"]["payload"]["by"] == "a" and out["right"]["payload"]["by"] == "b"
    assert out["left"]["trace"] == ["input", "start", "a"]
    assert out["payload_meta"]["startTime"] == a_got["startTime"]
    assert out["payload_meta"]["lastNode"] in {"a", "b"}

    # The archive's envelopes say the same (the inspector shows them).
    join_in = by_node["join"]["input"]
    assert join_in["from"] in {"a", "b"} and join_in["to"] == "join"
    assert join_in["meta"]["nodeType"] == PASS
    join_out = by_node["join"]["output"]
    assert join_out["trace"][-1]["nodeId"] == "join" and join_out["meta"]["lastNode"] == "join"


async def test_shared_state_and_context_are_carried_across_continue_as_new(
    runner: GraphRunner,
) -> None:
    loops = 60
    spec = graph(
        "shared-state",
        [
            {"id": "count", "type": COUNT, "writes": ["count", "log"]},
            {"id": "report", "type": REPORT},
        ],
        [
            {"from": "count", "to": "count", "max_iterations": loops},
            {"from": "count", "to": "report"},
        ],
        state={"writable": ["count", "log"]},
    )
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=spec, input=None, continue_as_new_after_events=100),
        id=f"state-{uuid.uuid4().hex[:8]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    result = await handle.result()
    assert result.generation > 2
    assert result.output == {
        "state": {"count": loops + 1, "log": {"last": loops + 1}},
        "context": {"last": loops + 1},
    }
    reports = [r for r in await runner.archive.node_reports(handle.id) if r["node_id"] == "count"]
    last = max(reports, key=lambda r: r["visit"])
    assert last["output"]["stateUpdates"]["set"] == {"count": loops + 1}
    assert last["output"]["contextUpdates"]["set"] == {"last": loops + 1}
    # The run view's node detail (the inspector) carries each execution's writes.
    inspected = await inspect_node(handle.id, "count", run=None, archive=runner.archive)  # type: ignore[arg-type]
    latest = max(inspected.executions, key=lambda e: e.visit)
    assert latest.state_updates == {
        "set": {"count": loops + 1},
        "merge": {"log": {"last": loops + 1}},
        "delete": [],
    }
    assert latest.context_updates == {"set": {"last": loops + 1}, "merge": {}, "delete": []}
    # The trace stays bounded however long the loop ran.
    assert len(last["output"]["trace"]) == TRACE_STEPS_KEPT
    assert last["output"]["traceCount"] == loops + 2


async def _failure(runner: GraphRunner, spec: Any, **run: Any) -> ApplicationError:
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=spec, input={"text": 3}, **run),
        id=f"{spec.name}-{uuid.uuid4().hex[:8]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    return cause


async def test_an_undeclared_state_key_is_the_nodes_error(runner: GraphRunner) -> None:
    spec = graph(
        "undeclared",
        [{"id": "w", "type": WRITE, "params": {"key": "secret", "value": 1}}],
        [],
        state={"writable": ["count"]},
    )
    cause = await _failure(runner, spec)
    assert cause.type == "StateWriteRefused"
    assert "node 'w'" in cause.message and "state key 'secret' is not writable" in cause.message


async def test_a_write_past_the_size_bound_is_refused_naming_key_and_size(
    runner: GraphRunner,
) -> None:
    spec = graph(
        "too-large",
        [{"id": "w", "type": WRITE, "params": {"key": "notes", "value": "x" * 5000}}],
        [],
        state={"writable": ["notes"]},
    )
    cause = await _failure(runner, spec, shared_state_max_bytes=4096)
    assert cause.type == "StateWriteRefused"
    assert "state key 'notes' is 5,002 bytes" in cause.message
    assert "shared_state_max_bytes setting (4,096" in cause.message


async def test_a_payload_that_breaks_the_input_schema_fails_the_node_naming_the_field(
    runner: GraphRunner,
) -> None:
    schema = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
    spec = graph(
        "schema-in",
        [
            {"id": "start", "type": PASS},
            {"id": "checked", "type": PASS, "input_schema": {**schema, "required": ["by"]}},
            {"id": "out", "type": PASS, "output_schema": schema},
        ],
        [{"from": "start", "to": "checked"}, {"from": "checked", "to": "out"}],
    )
    cause = await _failure(runner, spec)
    assert cause.type == "NodeFailed"
    assert "node 'out'" in cause.message
    assert "output does not fit its output_schema" in cause.message
    assert "payload.text: 'text' is a required property" in cause.message

    entry = graph("schema-entry", [{"id": "first", "type": PASS, "input_schema": schema}], [])
    cause = await _failure(runner, entry)
    assert "input from 'input': payload.text: 3 is not of type 'string'" in cause.message


async def test_a_map_checks_each_item_against_its_schemas(runner: GraphRunner) -> None:
    spec = graph(
        "schema-map",
        [
            {
                "id": "m",
                "type": "map",
                "input_schema": {"type": "object", "required": ["text"]},
                "params": {
                    "over": "input.rows",
                    "node": {
                        "type": "tool",
                        "params": {"tool": "word_count", "args": {"text": "{{ item.text }}"}},
                    },
                },
            }
        ],
        [],
    )
    handle = await runner.start(spec, {"rows": [{"text": "a b"}, {"txt": "c"}, {"text": "d"}]})
    result = await handle.result()
    items = result.output["items"]
    assert [("error" in item) for item in items] == [False, True, False]
    assert items[1]["error"]["message"] == (
        "item 1 ('1') input: payload.text: 'text' is a required property"
    )
