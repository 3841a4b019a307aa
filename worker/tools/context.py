"""What a tool may know about the call it serves: ``ToolContext`` (seed 004).

A tool is a plain typed function; one that declares a parameter annotated
``ToolContext`` (any name, e.g. ``ctx: ToolContext``) is given the calling run's
tenant, user, run and node ids and the run's ``context``. That parameter is not
an argument: it is left out of the tool's JSON Schema (the model never sees it)
and filled by whoever runs the tool — the ``tool_call`` activity of an agent, a
``tool`` node, or an agent item of a ``map`` (docs/graphs/tools.md#tool-context).

The context travels in a context variable set around the call (``calling_with``),
as the run's files do for ``read_file`` (``run_files.reading_files``), so a tool
never sees another run's ids even when calls of many runs share a worker.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

PlanPoster = Callable[[list[dict[str, str]], str | None], Awaitable[None]]
"""Posts a PLAN message for the calling node: (tasks, explanation)."""


@dataclass(frozen=True)
class ToolContext:
    """The run and node a tool call serves.

    Attributes:
        tenant_id: the run's tenant.
        user_id: the user who started the run (None for a scheduled run).
        run_id: the run's id, as the API names it (its Temporal workflow id).
        node_id: the node that called the tool (an agent, a ``tool`` node, a map).
        node_type: that node's type.
        graph_name: the run's graph.
        workstream_id: ``main``, or the workstream whose agent called it.
        context: the run's ``context`` (read-only by convention).
        meta: the metadata the calling node received.
        post_plan: posts a PLAN message (``update_plan``); None where the caller
            posts nothing (a map's items post no messages).
    """

    tenant_id: str
    user_id: str | None
    run_id: str
    node_id: str
    node_type: str
    graph_name: str
    workstream_id: str = "main"
    context: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    post_plan: PlanPoster | None = None


_CURRENT: ContextVar[ToolContext | None] = ContextVar("spindle_tool_context", default=None)


@contextlib.contextmanager
def calling_with(context: ToolContext) -> Iterator[None]:
    """Tool calls inside the block are given ``context``."""
    token = _CURRENT.set(context)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_tool_context() -> ToolContext | None:
    """The context of the tool call running now, if one was set."""
    return _CURRENT.get()


def tool_context_of(
    run: Any, node_id: str, node_type: str, state: dict[str, Any], **extra: Any
) -> ToolContext:
    """The context for a call from node ``node_id`` of ``run`` (a ``RunRef``), whose
    state holds the run's ``context`` and ``meta``."""
    context = state.get("context")
    meta = state.get("meta")
    return ToolContext(
        tenant_id=run.tenant_id,
        user_id=run.user_id,
        run_id=run.workflow_id,
        node_id=node_id,
        node_type=node_type,
        graph_name=run.graph_name,
        workstream_id=run.workstream_id,
        context=context if isinstance(context, dict) else {},
        meta=meta if isinstance(meta, dict) else {},
        **extra,
    )
