"""Seed 004's context through a whole run: the run's user reaches nodes and tools,
and an agent node names itself and its tenant in the metadata the next node sees."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from spindle.nodes import NodeContext, NodeResult, ToolContext, node_type, tool
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.graphs.structure import parse_graph
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow


@tool(name="test_run_ctx_who")
def who(ctx: ToolContext) -> dict[str, Any]:
    """Who called (test tool)."""
    return {
        "tenant": ctx.tenant_id,
        "user": ctx.user_id,
        "run": ctx.run_id,
        "node": ctx.node_id,
        "context": ctx.context,
        "meta": {k: ctx.meta.get(k) for k in ("agentId", "tenantId")},
    }


@node_type("test_run_ctx_node")
async def ids(ctx: NodeContext) -> NodeResult:
    """The node context's ids, and what the tool before it saw (test node type)."""
    seen = [ctx.tenant_id, ctx.user_id, ctx.run_id, ctx.node_id, ctx.context]
    return NodeResult(data={"node": seen, "tool": ctx.params["who"]})


async def test_nodes_and_tools_get_tenant_user_run_node_and_the_agents_meta(
    runner: GraphRunner,
) -> None:
    spec = parse_graph(
        {
            "name": "run-context",
            "entry": "ask",
            "nodes": [
                {"id": "ask", "type": "agent", "params": {"prompt": "Say hello"}},
                {"id": "who", "type": "tool", "params": {"tool": "test_run_ctx_who"}},
                {"id": "ids", "type": "test_run_ctx_node", "inputs": {"who": "who"}},
            ],
            "edges": [{"from": "ask", "to": "who"}, {"from": "who", "to": "ids"}],
        }
    )
    workflow_id = f"run-context-{uuid.uuid4().hex[:8]}"
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=spec, input=None, context={"plan": "gold"}, tenant_id="acme", user_id="ada"
        ),
        id=workflow_id,
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    result = await handle.result()

    assert result.output["tool"] == {
        "tenant": "acme",
        "user": "ada",
        "run": workflow_id,
        "node": "who",
        "context": {"plan": "gold"},
        "meta": {"agentId": "ask", "tenantId": "acme"},
    }
    assert result.output["node"] == ["acme", "ada", workflow_id, "ids", {"plan": "gold"}]
