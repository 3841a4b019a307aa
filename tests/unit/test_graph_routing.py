"""Routing nodes to task queues, and their priority: the graph fields, their
validation, the activity options the workflow derives from them, and the queues
a worker polls."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from temporalio.common import Priority

from spindle.shared.contracts.errors import GraphInvalid
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.node_types import BUILTIN_NODE_TYPES
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph
from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import policies
from spindle.worker.main import polled_queues

pytestmark = pytest.mark.unit


def graph(**extra: Any) -> GraphSpec:
    nodes = extra.pop("nodes", None) or [
        {"id": "think", "type": "agent", "params": {"prompt": "hi"}},
        {"id": "count", "type": "tool", "params": {"tool": "word_count", "args": {"text": "a"}}},
        {"id": "done", "type": "output", "params": {}, "task_queue": "io"},
    ]
    return parse_graph(
        {
            "name": "g",
            "entry": nodes[0]["id"],
            "nodes": nodes,
            "edges": [{"from": a["id"], "to": b["id"]} for a, b in itertools.pairwise(nodes)],
            **extra,
        }
    )


def test_a_node_type_mapping_routes_every_node_of_that_type() -> None:
    spec = graph(task_queues={"agent": "llm", "output": "ignored"})
    validate_graph(spec, Catalog())
    queues = {node.id: spec.task_queue_of(node) for node in spec.nodes}
    # The node's own task_queue wins over the mapping; unmapped types stay on the run's queue.
    assert queues == {"think": "llm", "count": None, "done": "io"}
    assert policies.routed(spec, spec.node("think")).task_queue == "llm"
    assert policies.routed(spec, spec.node("count")) is spec.node("count")


def test_an_unknown_node_type_in_the_mapping_is_refused_naming_it() -> None:
    spec = graph(task_queues={"agent": "llm", "summarizer": "llm"})
    with pytest.raises(GraphInvalid) as caught:
        validate_graph(spec, Catalog())
    assert [(e["field"], e["rule"]) for e in caught.value.errors] == [
        ("task_queues.summarizer", "unknown_node_type")
    ]
    assert "unknown node type 'summarizer'" in caught.value.detail


def test_a_local_node_naming_a_task_queue_is_refused() -> None:
    nodes = [{"id": "quick", "type": "output", "params": {}, "local": True, "task_queue": "io"}]
    with pytest.raises(GraphInvalid) as caught:
        validate_graph(graph(nodes=nodes), Catalog())
    assert [(e["node"], e["rule"]) for e in caught.value.errors] == [("quick", "local_task_queue")]


def test_a_local_node_is_not_routed_by_the_mapping() -> None:
    nodes = [{"id": "quick", "type": "output", "params": {}, "local": True}]
    spec = graph(nodes=nodes, task_queues={"output": "io"})
    validate_graph(spec, Catalog())
    assert spec.task_queue_of(spec.node("quick")) is None


@pytest.mark.parametrize(
    ("node", "task_queues", "local"),
    [
        ({"type": "output"}, {}, True),  # the type's default
        ({"type": "router", "params": {"routes": []}}, {}, True),
        ({"type": "output", "local": False}, {}, False),  # the node's own word wins
        ({"type": "output", "task_queue": "io"}, {}, False),  # only an activity reaches a queue
        ({"type": "output"}, {"output": "io"}, False),  # the graph's mapping too
        ({"type": "tool", "params": {"tool": "word_count"}}, {}, False),
        ({"type": "tool", "params": {"tool": "word_count"}, "local": True}, {}, True),
    ],
)
def test_which_nodes_run_as_local_activities(
    node: dict[str, Any], task_queues: dict[str, str], local: bool
) -> None:
    spec = graph(nodes=[{"id": "n", "params": {}, **node}], task_queues=task_queues)
    routed = policies.routed(spec, spec.node("n"))
    assert policies.runs_local(routed, BUILTIN_NODE_TYPES[routed.type]) is local


def test_an_unset_local_leaves_the_node_payload_as_it_was() -> None:
    spec = graph(nodes=[{"id": "n", "type": "output", "params": {}}])
    assert "local" not in spec.node("n").model_dump()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"priority": 0}, "nodes.0.priority"),
        ({"priority": 6}, "nodes.0.priority"),
        ({"task_queue": "no spaces"}, "nodes.0.task_queue"),
    ],
)
def test_bad_priority_or_queue_name_is_refused_naming_the_node(
    change: dict[str, Any], field: str
) -> None:
    nodes = [{"id": "only", "type": "output", "params": {}, **change}]
    with pytest.raises(GraphInvalid) as caught:
        graph(nodes=nodes)
    assert [(e["node"], e["field"]) for e in caught.value.errors] == [("only", field)]


def test_a_bad_queue_name_in_the_mapping_is_refused() -> None:
    with pytest.raises(GraphInvalid) as caught:
        graph(task_queues={"agent": ""})
    assert [e["field"] for e in caught.value.errors] == ["task_queues.agent"]


def test_priority_becomes_the_activity_priority_key() -> None:
    spec = graph(nodes=[{"id": "only", "type": "output", "params": {}, "priority": 1}])
    assert policies.node_priority(spec.node("only")) == Priority(priority_key=1)


def test_no_priority_schedules_what_it_did_before_the_field() -> None:
    # Priority.default is the SDK's own default argument: the command is unchanged.
    assert policies.node_priority(graph().node("count")) is Priority.default


@pytest.mark.parametrize(
    ("configured", "polled"),
    [
        ([], ["spindle"]),
        (["llm"], ["llm"]),
        (["llm", "spindle", "llm"], ["spindle", "llm"]),
    ],
)
def test_a_worker_polls_the_main_queue_unless_told_otherwise(
    configured: list[str], polled: list[str]
) -> None:
    settings = Settings(task_queue="spindle", worker_task_queues=configured)
    assert polled_queues(settings) == polled


def test_worker_task_queues_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPINDLE_WORKER_TASK_QUEUES", '["llm", "io"]')
    assert Settings().worker_task_queues == ["llm", "io"]


def test_a_graph_without_routing_serializes_as_before_the_fields() -> None:
    # What the run input carries to the workers: a worker of the previous release
    # (extra="forbid") still reads graphs that use neither field.
    plain = graph().model_dump(mode="json", by_alias=True)
    assert "task_queues" not in plain
    assert all("priority" not in node for node in plain["nodes"])
    routed = graph(
        task_queues={"agent": "llm"},
        nodes=[{"id": "only", "type": "output", "params": {}, "priority": 1}],
    ).model_dump(mode="json", by_alias=True)
    assert routed["task_queues"] == {"agent": "llm"}
    assert routed["nodes"][0]["priority"] == 1
    assert parse_graph(routed).model_dump(mode="json", by_alias=True) == routed
