"""Each node type is defined once (spindle.shared.graphs.node_types) and every reader
honours that definition: validation, the catalogs, the policies, the registry, the
workflow's dispatch, and the docs table."""

from __future__ import annotations

import inspect
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from spindle.nodes import NodeContext, NodeResult, RetryDefaults, node_type
from spindle.shared.contracts.errors import GraphInvalid
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.graphs.catalog import Catalog, NodeTypeInfo
from spindle.shared.graphs.node_types import BUILTIN_NODE_TYPES, NodeTypeSpec, RunKind
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph
from spindle.worker.contracts import policies
from spindle.worker.offerings import build_catalog, load_node_types
from spindle.worker.registry import spec_of
from spindle.worker.workflows.node_runners import RUNNERS, NodeRunners

pytestmark = pytest.mark.unit

SPECS = list(BUILTIN_NODE_TYPES.values())
BAD_TEMPLATE = "{{ output"
BAD_EXPRESSION = "{bad"
DOCS = Path(__file__).parents[2] / "docs" / "graphs" / "node-types.md"


class GreetParams(BaseModel):
    name: str
    greeting: str = "Hello"
    pick: str | None = None


@node_type(
    "test_drift_greet",
    params=GreetParams,
    templates=("greeting",),
    expressions=("pick",),
    timeout_seconds=7,
    retry=RetryDefaults(max_attempts=4, non_retryable_errors=("GreetRefused",)),
)
async def greet(ctx: NodeContext) -> NodeResult:
    """Greet someone."""
    return NodeResult(data=f"{ctx.params.greeting} {ctx.params.name}")


def one_node_graph(node: dict[str, Any]) -> Any:
    return parse_graph({"name": "g", "entry": node["id"], "nodes": [node], "edges": []})


def refusals(node: dict[str, Any], catalog: Catalog) -> set[tuple[str, str, str]]:
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(one_node_graph(node), catalog)
    return {(e["node"], e["field"], e["rule"]) for e in exc.value.errors}


def test_builtin_catalog_lists_exactly_the_specs() -> None:
    catalog = Catalog.builtin()
    assert set(catalog.node_types) == set(BUILTIN_NODE_TYPES)
    for spec in SPECS:
        assert catalog.node_types[spec.name] == NodeTypeInfo.of(spec)
        assert catalog.node_types[spec.name].params_schema == spec.params_schema()


def test_worker_catalog_publishes_builtins_and_plugins_from_their_specs() -> None:
    catalog = build_catalog()
    registered = load_node_types()
    assert set(catalog.node_types) == set(BUILTIN_NODE_TYPES) | set(registered)
    for name, info in catalog.node_types.items():
        spec = spec_of(name)
        assert spec is not None and info == NodeTypeInfo.of(spec)
    greet_info = catalog.node_types["test_drift_greet"]
    assert greet_info.templates == ["greeting"]
    assert greet_info.expressions == ["pick"]
    assert greet_info.timeout_seconds == 7


def test_activity_builtins_have_an_implementation_and_workflow_ones_none() -> None:
    registered = load_node_types()
    for spec in SPECS:
        if spec.workflow_driven:
            assert spec.name not in registered
        else:
            assert registered[spec.name].spec is spec


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_policies_take_timeout_and_retry_from_the_spec(spec: NodeTypeSpec) -> None:
    for local in (False, True):
        node = NodeSpec(id="n", type=spec.name, local=local)
        if spec.timeout_seconds is not None:
            assert policies.node_timeout(node) == timedelta(seconds=spec.timeout_seconds)
    retry = policies.type_retry(spec)
    if spec.retry is None:
        assert retry == policies.NODE_RETRY
        return
    assert retry.maximum_attempts == spec.retry.max_attempts
    assert retry.initial_interval == timedelta(seconds=spec.retry.initial_interval_seconds)
    assert retry.maximum_interval == timedelta(seconds=spec.retry.max_interval_seconds)
    assert retry.backoff_coefficient == spec.retry.backoff_coefficient
    assert set(spec.retry.non_retryable_errors) <= set(retry.non_retryable_error_types or [])


def test_agent_turns_retry_with_the_agent_spec() -> None:
    assert policies.type_retry(BUILTIN_NODE_TYPES["agent"]) == policies.LLM_RETRY


def test_every_run_kind_has_a_workflow_handler() -> None:
    assert set(RUNNERS) == set(RunKind)
    for spec in SPECS:
        runner = RUNNERS[spec.runs]
        assert inspect.iscoroutinefunction(runner)
        assert getattr(NodeRunners, runner.__name__) is runner


@pytest.mark.parametrize(
    "spec", [s for s in SPECS if s.checked_templates or s.expressions], ids=lambda s: s.name
)
def test_validation_checks_every_template_and_expression_of_a_spec(spec: NodeTypeSpec) -> None:
    params = {name: BAD_TEMPLATE for name in spec.checked_templates}
    params.update({name: BAD_EXPRESSION for name in spec.expressions})
    found = refusals({"id": "n", "type": spec.name, "params": params}, Catalog())
    for name in spec.checked_templates:
        assert ("n", f"params.{name}", "bad_template") in found
    for name in spec.expressions:
        assert ("n", f"params.{name}", "bad_expression") in found


def test_a_plugin_template_and_expression_are_checked_through_the_published_catalog() -> None:
    # The gateway knows the plug-in only from what the worker published.
    published = Catalog.model_validate_json(build_catalog().model_dump_json())
    node = {"id": "hi", "type": "test_drift_greet", "params": {"name": "Ada"}}
    validate_graph(one_node_graph(node), published)
    node["params"] = {"name": "Ada", "greeting": BAD_TEMPLATE, "pick": BAD_EXPRESSION}
    assert refusals(node, published) == {
        ("hi", "params.greeting", "bad_template"),
        ("hi", "params.pick", "bad_expression"),
    }


def test_a_plugin_spec_sets_its_timeout_and_retry() -> None:
    spec = spec_of("test_drift_greet")
    assert spec is not None and spec.runs is RunKind.ACTIVITY
    node = NodeSpec(id="hi", type="test_drift_greet")
    assert policies.node_timeout(node, spec) == timedelta(seconds=7)
    retry = policies.node_retry(node, policies.type_retry(spec))
    assert retry.maximum_attempts == 4
    assert "GreetRefused" in (retry.non_retryable_error_types or [])
    assert "InvalidParams" in (retry.non_retryable_error_types or [])


def test_an_archived_catalog_without_the_new_fields_still_parses() -> None:
    old = {"node_types": {"shout": {"name": "shout", "params_schema": {"type": "object"}}}}
    info = Catalog.model_validate(old).node_types["shout"]
    assert (info.templates, info.expressions, info.runs, info.timeout_seconds) == (
        [],
        [],
        "activity",
        None,
    )


def docs_cell(values: tuple[str, ...]) -> str:
    return ", ".join(f"`{v}`" for v in values) or "—"


def docs_row(spec: NodeTypeSpec) -> list[str]:
    """A spec as the docs table writes it."""
    timeout = f"{spec.timeout_seconds:g} s" if spec.timeout_seconds is not None else "—"
    retry = "—"
    if spec.retry is not None:
        r = spec.retry
        retry = (
            f"{r.max_attempts} attempts, first wait {r.initial_interval_seconds:g} s, "
            f"backoff {r.backoff_coefficient:g}, up to {r.max_interval_seconds:g} s"
        )
    return [
        f"`{spec.name}`",
        f"`{spec.runs.value}`" + (" (local)" if spec.local else ""),
        docs_cell(spec.checked_templates),
        docs_cell(spec.expressions),
        timeout,
        retry,
    ]


def test_docs_table_matches_the_specs() -> None:
    text = DOCS.read_text()
    assert text.startswith("# Node types\n")
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if re.match(r"^\| `[a-z_]+` \|", line)
    ]
    assert rows == [docs_row(spec) for spec in SPECS]
