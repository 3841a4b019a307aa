"""Launching workstreams from a graph (``workstream`` nodes), from an agent's
tools, and with the real ``Workstream`` child; artifacts merge into the parent."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.errors import GraphInvalid
from spindle.shared.contracts.runs import GraphRunResult, NodeStatus, RunStatus
from spindle.shared.contracts.workstreams import (
    WorkstreamState,
    child_workflow_id,
)
from spindle.shared.graphs.validation import validate_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.offerings import build_catalog
from tests.workflow.runs import GraphRunner, M, types_of
from tests.workflow.workstream_parents import (
    Parents,
    graph,
    production_runner,
    workstream_node,
)

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
async def real_runner(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[GraphRunner]:
    async with production_runner(
        time_skipping_env, worker_settings, run_bus, run_archive
    ) as runner:
        yield runner


# -- the workstream node and the agent tools -------------------------------------------------


async def test_workstream_node_waits_for_the_outcome_and_merges_artifacts(
    parents: Parents,
) -> None:
    workflow_id = f"ws-wait-{uuid.uuid4().hex[:10]}"
    child_id = child_workflow_id(workflow_id, "ws-1")
    for name, data in (
        ("out/report.md", b"# Report\n"),
        ("files/data.json", b"[1, 2]"),
        ("notes.txt", b"not an artifact"),
    ):
        await parents.files.put_bytes(
            tenant_id="default", workflow_id=child_id, name=name, data=data
        )
    spec = graph(
        "ws-wait",
        workstream_node("Summarize {{ input.topic }}", wait=True, label="summary"),
        {"id": "done", "type": "output", "params": {"select": "launch.state"}},
    )
    validate_graph(spec, build_catalog())
    handle = await parents.runner.start(spec, {"topic": "Temporal"}, workflow_id=workflow_id)
    result: GraphRunResult = await handle.result()

    assert result.output == "completed"
    report = result.node_reports[0]
    assert (report.node_id, report.status) == ("launch", NodeStatus.SUCCESS)
    (info,) = await parents.workstreams(handle)
    assert info.task == "Summarize Temporal"  # the template rendered
    assert info.label == "summary"
    assert info.state is WorkstreamState.COMPLETED
    assert info.summary == "done: Summarize Temporal"
    assert info.artifacts == ["files/ws-1/data.json", "files/ws-1/report.md"]
    stored = await parents.files.list(tenant_id="default", workflow_id=workflow_id)
    assert [f.name for f in stored] == info.artifacts
    report_file = await parents.files.get(
        tenant_id="default", workflow_id=workflow_id, name="files/ws-1/report.md"
    )
    assert b"".join([c async for c in parents.files.open(report_file)]) == b"# Report\n"
    (end,) = [p for p in parents.posts.calls[workflow_id] if p.type is M.SYSTEM]
    assert end.text == "Workstream ws-1 completed: done: Summarize Temporal"
    assert end.details["artifacts"] == info.artifacts


async def test_workstream_node_without_wait_outputs_the_launch_at_once(parents: Parents) -> None:
    workflow_id = f"ws-nowait-{uuid.uuid4().hex[:10]}"
    await parents.files.put_bytes(
        tenant_id="default",
        workflow_id=child_workflow_id(workflow_id, "ws-1"),
        name="out/kept.md",
        data=b"stays with the child",
    )
    spec = graph("ws-nowait", workstream_node("index the docs", merge_child_artifacts=False))
    handle = await parents.runner.start(spec, workflow_id=workflow_id)
    result = await handle.result()
    assert result.output == {"launch_id": "ws-1", "child_workflow_id": f"{workflow_id}.ws-1"}
    (info,) = await parents.workstreams(handle)
    assert info.state is WorkstreamState.COMPLETED
    assert info.artifacts == []
    assert await parents.files.list(tenant_id="default", workflow_id=workflow_id) == []
    kinds = types_of(await parents.runner.messages(handle.id))
    assert kinds[-2:] == [M.SYSTEM, M.COMPLETE]


async def test_an_agent_launches_a_workstream_with_its_tool(parents: Parents) -> None:
    spec = graph(
        "ws-agent",
        {
            "id": "lead",
            "type": "agent",
            "params": {"tools": ["launch_workstream"], "max_turns": 3},
        },
    )
    validate_graph(spec, build_catalog())
    handle = await parents.runner.start(spec, "Compare Temporal and Cadence")
    result = await handle.result()

    (info,) = await parents.workstreams(handle)
    assert info.task == "Compare Temporal and Cadence"
    assert info.state is WorkstreamState.COMPLETED
    assert '"launch_id":"ws-1"' in result.output  # the tool result the model read
    messages = await parents.runner.messages(handle.id)
    kinds = types_of(messages)
    thought = messages[kinds.index(M.THOUGHT)]
    assert thought["d"]["tool_calls"][0]["name"] == "launch_workstream"
    assert kinds.index(M.ANSWER) < kinds.index(M.SYSTEM) < kinds.index(M.COMPLETE)


async def test_workstream_tool_errors_go_back_to_the_model(parents: Parents) -> None:
    spec = graph(
        "ws-agent-error",
        {"id": "lead", "type": "agent", "params": {"tools": ["terminate_workstream"]}},
    )
    handle = await parents.runner.start(spec, "ws-42")
    result = await handle.result()
    assert "terminate_workstream failed: unknown workstream 'ws-42'" in result.output
    assert await parents.workstreams(handle) == []


def test_graphs_with_workstreams_are_validated_before_a_run() -> None:
    catalog = build_catalog()
    too_short = graph("bad-deadline", workstream_node("x", deadline_seconds=10))
    with pytest.raises(GraphInvalid) as bad:
        validate_graph(too_short, catalog)
    assert bad.value.errors[0]["field"] == "params.deadline_seconds"
    assert "30" in bad.value.errors[0]["message"]
    unknown_tool = graph(
        "bad-tool", {"id": "a", "type": "agent", "params": {"tools": ["launch_rocket"]}}
    )
    with pytest.raises(GraphInvalid):
        validate_graph(unknown_tool, catalog)
    tools = graph(
        "tools",
        {
            "id": "a",
            "type": "agent",
            "params": {
                "tools": [
                    "launch_workstream",
                    "steer_workstream",
                    "message_workstream",
                    "terminate_workstream",
                ]
            },
        },
    )
    validate_graph(tools, catalog)


# -- with the real child ------------------------------------------------------------


async def test_the_real_child_reports_on_the_parents_stream_and_its_result_merges(
    real_runner: GraphRunner, parents: Parents
) -> None:
    spec = graph(
        "ws-real",
        workstream_node(
            "What is {{ input.question }}?",
            wait=True,
            agent={"tools": ["calculator"], "max_turns": 3},
        ),
    )
    validate_graph(spec, build_catalog())
    handle = await real_runner.start(spec, {"question": "6 * 7"})
    result = await handle.result()

    assert result.status is RunStatus.COMPLETED
    assert result.output["state"] == "completed"
    assert "42" in result.output["summary"]
    (info,) = await parents.workstreams(handle)
    assert info.state is WorkstreamState.COMPLETED
    assert "files/ws-1/result.md" in info.artifacts
    merged = await parents.files.get(
        tenant_id="default", workflow_id=handle.id, name="files/ws-1/result.md"
    )
    assert b"42" in b"".join([c async for c in parents.files.open(merged)])

    messages = await real_runner.messages(handle.id)
    child = [m for m in messages if m.get("w") == "ws-1"]
    main = [m for m in messages if "w" not in m]
    assert child, "the child posts to the parent's stream under its workstream id"
    assert types_of(child)[-1] is M.COMPLETE  # the child's own completion
    assert types_of(main)[-2:] == [M.SYSTEM, M.COMPLETE]
    assert types_of(messages)[-1] is M.COMPLETE and "w" not in messages[-1]
