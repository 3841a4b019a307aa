"""Writing node types and tools for Spindle graphs: everything a plug-in imports.

A node type is one spec (the decorator's arguments) plus one async function. The
worker registers it, runs it in the ``execute_node`` activity, and publishes its
spec in the catalog, so the gateway checks its params, templates and expressions
before a run starts. A tool is a typed Python function that ``tool`` and
``agent`` nodes call.

Example (a package ``acme_nodes`` with a module ``acme_nodes/greet.py``)::

    from pydantic import BaseModel, Field

    from spindle.nodes import NodeContext, NodeResult, RetryDefaults, node_type, tool


    class GreetParams(BaseModel):
        name: str = Field(min_length=1)
        greeting: str = "Hello, {{ input.title }}"
        pick: str | None = None  # a JMESPath expression over the run state


    @node_type(
        "greet",
        params=GreetParams,
        templates=("greeting",),  # rendered over the run state before validation
        expressions=("pick",),  # the gateway checks that it compiles
        timeout_seconds=20,
        retry=RetryDefaults(max_attempts=5),
    )
    async def greet(ctx: NodeContext) -> NodeResult:
        \"\"\"Greet someone by name.\"\"\"
        params: GreetParams = ctx.params
        return NodeResult(data=f"{params.greeting} {params.name}", metadata={"greeted": True})


    @tool
    def shout(text: str) -> str:
        \"\"\"Upper-case a text.

        Args:
            text: what to shout.
        \"\"\"
        return text.upper()

and in the package's ``pyproject.toml``, so every worker that has it installed
imports the module (which registers both) at start-up::

    [project.entry-points."spindle.node_types"]
    acme = "acme_nodes.greet"

    [project.entry-points."spindle.tools"]
    acme = "acme_nodes.greet"

Install it on the workers that run the graph workflows too: they read a plug-in's
``timeout_seconds`` and ``retry`` from their own registry (a worker without it
schedules the node with the defaults: 5 minutes, ``RetryDefaults()``).

A graph then uses ``{"id": "hi", "type": "greet", "params": {"name": "Ada"}}``.

``ctx.state`` holds only the state keys the node's ``inputs``, templates and
expressions name, plus ``_previous``, ``meta``, ``context``, the shared ``state``
and the outputs its arriving envelopes carry (history per node
stays constant, docs/graphs/index.md). A type whose code reads other keys of
``ctx.state`` says ``reads_state=StateReads.ALL``: it then gets every node's
output, which costs history with every node the graph has.

``ctx.inputs`` / ``ctx.input(port)`` are the NodeMessage envelopes that arrived on
the edges into the node (docs/graphs/envelopes.md); ``NodeResult(state=StateUpdate(...),
context=StateUpdate(...))`` writes shared state and context
(docs/graphs/index.md#shared-state).
"""

from spindle.shared.contracts.envelope import ExecutionPayload, NodeMessage, StateUpdate
from spindle.shared.contracts.errors import ToolError
from spindle.shared.graphs.node_types import NodeTypeSpec, RetryDefaults, RunKind, StateReads
from spindle.worker.registry import ClosingPost, NodeContext, NodeResult, node_type
from spindle.worker.tools.context import ToolContext
from spindle.worker.tools.registry import tool

__all__ = [
    "ClosingPost",
    "ExecutionPayload",
    "NodeContext",
    "NodeMessage",
    "NodeResult",
    "NodeTypeSpec",
    "RetryDefaults",
    "RunKind",
    "StateReads",
    "StateUpdate",
    "ToolContext",
    "ToolError",
    "node_type",
    "tool",
]
