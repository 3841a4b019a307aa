"""Task tree → graph spec conversion (``spindle.shared.graphs.task_tree``)."""

from __future__ import annotations

from typing import Any

import pytest

from spindle.shared.contracts.errors import CircularDependency, ExecutorNotFound, ValidationFailed
from spindle.shared.contracts.tasks import Task, new_task_id
from spindle.shared.graphs.catalog import Catalog, ToolInfo
from spindle.shared.graphs.task_tree import (
    ENTRY_NODE_ID,
    build_task_graph,
    find_cycle,
    node_id_of,
    task_run_meta,
)

pytestmark = pytest.mark.unit

CATALOG = Catalog(
    tools={
        "word_count": ToolInfo(
            name="word_count",
            params_schema={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        )
    },
    tools_known=True,
)


def task(name: str, *, deps: list[str] | None = None, priority: int = 2, **fields: Any) -> Task:
    return Task(
        id=new_task_id(),
        name=name,
        user_id="u",
        tenant_id="t",
        priority=priority,
        dependencies=deps or [],
        **fields,
    )


def counting(name: str, text: str = "a b c", **kw: Any) -> Task:
    return task(name, schemas={"method": "word_count"}, inputs={"text": text}, **kw)


def test_dependencies_become_edges_and_tools_become_tool_nodes() -> None:
    a = counting("a")
    b = counting("b", deps=[a.id])
    c = counting("c", deps=[a.id, b.id])
    graph = build_task_graph([c, b, a], CATALOG, root_task_id=a.id)

    assert graph.spec.entry == node_id_of(a.id)
    pairs = {(e.from_, e.to) for e in graph.spec.edges}
    assert pairs == {
        (node_id_of(a.id), node_id_of(b.id)),
        (node_id_of(a.id), node_id_of(c.id)),
        (node_id_of(b.id), node_id_of(c.id)),
    }
    node = graph.spec.node(node_id_of(b.id))
    assert node.type == "tool"
    assert node.params == {"tool": "word_count", "args": {"text": "a b c"}}
    assert graph.task_of(node_id_of(c.id)) == c.id
    meta = task_run_meta({"task_run": graph.meta.model_dump()})
    assert meta is not None and meta.root_task_id == a.id


def test_independent_tasks_hang_off_a_start_node_in_priority_order() -> None:
    low = counting("low", priority=3)
    urgent = counting("urgent", priority=0)
    normal = counting("normal", priority=2)
    graph = build_task_graph([low, urgent, normal], CATALOG, root_task_id=low.id)

    assert graph.spec.entry == ENTRY_NODE_ID
    assert [e.to for e in graph.spec.edges] == [
        node_id_of(urgent.id),
        node_id_of(normal.id),
        node_id_of(low.id),
    ]
    assert ENTRY_NODE_ID not in graph.meta.nodes


def test_node_type_executor_takes_params_and_inputs() -> None:
    ask = task("ask", schemas={"method": "prompt"}, params={"title": "T"}, inputs={"prompt": "Go?"})
    graph = build_task_graph([ask], CATALOG, root_task_id=ask.id)
    node = graph.spec.node(node_id_of(ask.id))
    assert (node.type, node.params) == ("prompt", {"title": "T", "prompt": "Go?"})


def test_a_task_without_executor_is_a_pass_through() -> None:
    group = task("group")
    child = counting("child", parent_id=group.id)
    graph = build_task_graph([group, child], CATALOG, root_task_id=group.id)
    assert graph.spec.node(node_id_of(group.id)).type == "output"


def test_a_cycle_is_refused_with_its_tasks() -> None:
    a, b = counting("a"), counting("b")
    a.dependencies = Task.model_validate({**a.model_dump(), "dependencies": [b.id]}).dependencies
    b.dependencies = Task.model_validate({**b.model_dump(), "dependencies": [a.id]}).dependencies
    assert find_cycle([a, b]) in ([a.id, b.id, a.id], [b.id, a.id, b.id])
    with pytest.raises(CircularDependency) as caught:
        build_task_graph([a, b], CATALOG, root_task_id=a.id)
    assert caught.value.jsonrpc_code == -32002


def test_an_unknown_executor_is_32003_naming_the_task() -> None:
    bad = task("bad", schemas={"method": "no_such_executor"})
    with pytest.raises(ExecutorNotFound) as caught:
        build_task_graph([bad], CATALOG, root_task_id=bad.id)
    assert caught.value.jsonrpc_code == -32003
    assert caught.value.errors[0]["task_id"] == bad.id
    assert caught.value.errors[0]["field"] == "schemas.method"


def test_a_dependency_outside_the_tree_is_invalid_params() -> None:
    lone = counting("lone", deps=[new_task_id()])
    with pytest.raises(ValidationFailed) as caught:
        build_task_graph([lone], CATALOG, root_task_id=lone.id)
    assert caught.value.jsonrpc_code == -32602
    assert caught.value.errors[0]["field"] == "dependencies"


def test_bad_executor_params_name_the_task_and_field() -> None:
    bad = task("bad", schemas={"method": "word_count"}, inputs={"text": 5})
    with pytest.raises(ValidationFailed) as caught:
        build_task_graph([bad], CATALOG, root_task_id=bad.id)
    assert caught.value.jsonrpc_code == -32602
    assert caught.value.errors[0]["task_id"] == bad.id
    assert caught.value.errors[0]["field"].startswith("inputs.args")


def test_a_tool_executor_takes_its_inputs_as_the_tool_arguments() -> None:
    count = task(
        "count", schemas={"method": "tool"}, params={"tool": "word_count"}, inputs={"text": "x y"}
    )
    graph = build_task_graph([count], CATALOG, root_task_id=count.id)
    node = graph.spec.node(node_id_of(count.id))
    assert node.params == {"tool": "word_count", "args": {"text": "x y"}}
