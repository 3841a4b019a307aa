"""Node types as data: one frozen ``NodeTypeSpec`` per type, the built-ins declared here.

A spec says everything the rest of Spindle needs to know about a node type:

- its params model (the catalog publishes its JSON Schema, validation checks it),
- which params are ``{{ expression }}`` templates and which are JMESPath expressions,
- its default start-to-close timeout and retry policy, as plain numbers
  (``spindle.worker.contracts.policies`` turns them into Temporal objects),
- how it runs (``RunKind``): as the ``execute_node`` activity, or driven by the
  workflow itself (agent loop, human input, workstream launch), and whether its
  ``execute_node`` is a local activity unless the node says otherwise,
- rules only that type has (``spindle.shared.graphs.node_rules``).

Built-ins are declared once, below; plug-in types build the same spec through
``spindle.nodes.node_type``. Pure module (no I/O, no clock): the workflow sandbox
passes it through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from spindle.shared.contracts.errors import LlmAuthenticationError
from spindle.shared.graphs import node_rules
from spindle.shared.graphs.node_params import (
    AgentParams,
    FilterParams,
    MapParams,
    MergeParams,
    OutputParams,
    PromptParams,
    RouterParams,
    ToolParams,
    WorkstreamParams,
)
from spindle.shared.graphs.node_rules import NodeRule


class RunKind(StrEnum):
    """How the workflow runs a node of a type."""

    ACTIVITY = "activity"
    """The ``execute_node`` activity (a local activity when the node sets ``local``)."""
    AGENT_LOOP = "agent_loop"
    """The workflow's LLM loop: one ``llm_turn`` activity per turn, one ``tool_call`` per tool."""
    HUMAN_INPUT = "human_input"
    """Ask (``request_input``), wait in the workflow for a valid answer, then ``accept_input``."""
    WORKSTREAM = "workstream"
    """Launch a child ``Workstream`` workflow from the run's workflow."""
    MAP = "map"
    """Plan the items, run them in batch activities (``run_item_batch``), collect them."""


class StateReads(StrEnum):
    """How much of the run state a node type's activity receives (docs/graphs/index.md)."""

    DECLARED = "declared"
    """The keys its ``inputs``, templates and expressions name, plus ``_previous``,
    ``meta`` and ``context`` (``spindle.shared.graphs.state_reads``)."""
    ALL = "all"
    """The whole state: every node's output. Its history cost grows with the number of
    nodes in the graph; for types whose code reads ``ctx.state`` freely."""


@dataclass(frozen=True)
class RetryDefaults:
    """A node type's default retry policy as plain data; a node's own ``retry`` overrides it.

    ``non_retryable_errors`` are added to the errors no node retries
    (``spindle.worker.contracts.policies.NON_RETRYABLE_ERRORS``).
    """

    initial_interval_seconds: float = 1.0
    backoff_coefficient: float = 2.0
    max_interval_seconds: float = 30.0
    max_attempts: int = 3
    non_retryable_errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeTypeSpec:
    """Everything about one node type except its implementation.

    Attributes:
        name: the node ``type`` graphs use.
        description: one line for the catalog.
        params: pydantic model of the resolved params (None: any JSON object).
        templates: params whose strings (nested in dicts/lists too) are rendered as
            ``{{ expression }}`` templates over the run state before validation.
        deferred_templates: template params the node renders itself, later and with
            names only it knows (``output``'s ``message`` sees ``output``); checked
            like ``templates``, not rendered before validation.
        expressions: params that are JMESPath expressions over the run state.
        item_expressions: ``list_param.field`` paths: that field of each object in
            a list param is an expression over the state (``routes.when``).
        reads_state: which state keys its activity receives (``StateReads``).
        timeout_seconds: default start-to-close timeout of one of its activities
            (None: the worker's default for an activity or a local activity).
        retry: default retry policy of its activities; None: its activities are the
            run's bookkeeping (lifecycle policy) or it has none, and a node's own
            ``retry`` does not apply.
        runs: how the workflow runs it.
        local: its ``execute_node`` is a local activity unless the node sets
            ``local: false`` or a task queue: for short pure types (router, output),
            whose work is an expression and a post, a trip through the Temporal
            server's task queues would cost more than the node itself
            (docs/benchmarks-history.md#node-cost-and-throughput-run).
        sets_run_output: its output is the run's result (else the last node's is).
        rules: checks only this type has, run by graph validation.
        inline_node: the param holding a node definition the type runs itself
            (``map``'s ``node``); validation checks it as a node of its own.
    """

    name: str
    description: str = ""
    params: type[BaseModel] | None = None
    templates: tuple[str, ...] = ()
    deferred_templates: tuple[str, ...] = ()
    expressions: tuple[str, ...] = ()
    item_expressions: tuple[str, ...] = ()
    reads_state: StateReads = StateReads.DECLARED
    timeout_seconds: float | None = None
    retry: RetryDefaults | None = field(default_factory=RetryDefaults)
    runs: RunKind = RunKind.ACTIVITY
    local: bool = False
    sets_run_output: bool = False
    rules: tuple[NodeRule, ...] = ()
    inline_node: str | None = None

    @property
    def workflow_driven(self) -> bool:
        """True when the workflow runs it itself, not through ``execute_node``."""
        return self.runs is not RunKind.ACTIVITY

    @property
    def checked_templates(self) -> tuple[str, ...]:
        """Every template param validation compiles: rendered early or by the node."""
        return (*self.templates, *self.deferred_templates)

    def params_schema(self) -> dict[str, Any]:
        """The JSON Schema of its params (any object when it declares no model)."""
        if self.params is None:
            return {"type": "object"}
        return self.params.model_json_schema()


def _summary(model: type[BaseModel]) -> str:
    return (model.__doc__ or "").strip().split("\n\n", 1)[0]


AGENT = NodeTypeSpec(
    name="agent",
    description=_summary(AgentParams),
    params=AgentParams,
    templates=("instructions", "prompt"),
    timeout_seconds=300,  # per LLM turn
    # Providers rate-limit and time out: back off longer; a bad key is final.
    retry=RetryDefaults(
        initial_interval_seconds=2,
        max_interval_seconds=60,
        max_attempts=5,
        non_retryable_errors=(LlmAuthenticationError.application_type,),
    ),
    runs=RunKind.AGENT_LOOP,
    rules=(node_rules.agent_tools, node_rules.agent_output_schema),
)
TOOL = NodeTypeSpec(
    name="tool",
    description=_summary(ToolParams),
    params=ToolParams,
    templates=("args",),
    timeout_seconds=300,
    rules=(node_rules.tool_reference,),
)
PROMPT = NodeTypeSpec(
    name="prompt",
    description=_summary(PromptParams),
    params=PromptParams,
    templates=("prompt", "title"),
    timeout_seconds=30,  # asking and accepting; the wait is not an activity
    retry=None,
    runs=RunKind.HUMAN_INPUT,
    rules=(node_rules.prompt_ui_schema, node_rules.prompt_expiry),
)
ROUTER = NodeTypeSpec(
    name="router",
    description=_summary(RouterParams),
    params=RouterParams,
    item_expressions=("routes.when",),
    timeout_seconds=30,
    local=True,
    rules=(node_rules.router_conditions, node_rules.router_ports),
)
OUTPUT = NodeTypeSpec(
    name="output",
    description=_summary(OutputParams),
    params=OutputParams,
    deferred_templates=("message",),
    expressions=("select",),
    timeout_seconds=30,
    local=True,
    sets_run_output=True,
)
WORKSTREAM = NodeTypeSpec(
    name="workstream",
    description=_summary(WorkstreamParams),
    params=WorkstreamParams,
    templates=("task", "label"),
    retry=None,  # a child workflow, no activity of its own
    runs=RunKind.WORKSTREAM,
)

MAP = NodeTypeSpec(
    name="map",
    description=_summary(MapParams),
    params=MapParams,
    expressions=("over",),
    timeout_seconds=300,  # per activity: the plan, one batch of items, the collection
    runs=RunKind.MAP,
    inline_node="node",
)
FILTER = NodeTypeSpec(
    name="filter",
    description=_summary(FilterParams),
    params=FilterParams,
    expressions=("items", "where"),
    timeout_seconds=60,
)
MERGE = NodeTypeSpec(
    name="merge",
    description=_summary(MergeParams),
    params=MergeParams,
    expressions=("over",),
    timeout_seconds=60,
)

BUILTIN_NODE_TYPES: dict[str, NodeTypeSpec] = {
    spec.name: spec
    for spec in (AGENT, TOOL, PROMPT, ROUTER, OUTPUT, WORKSTREAM, MAP, FILTER, MERGE)
}
"""The built-in node types by name."""
