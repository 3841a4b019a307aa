"""Activities: every piece of I/O a graph run does.

``build_activities`` wires the activity classes to their dependencies (bus,
archive, LLM provider, the worker's settings) and returns the bound activity
methods a Temporal ``Worker`` registers. No activity reads global settings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.platform.settings import Settings
    from spindle.shared.store.archive import RunArchive
    from spindle.worker.llm.base import LlmProvider
    from spindle.worker.tools.mcp_client import McpToolCache


def build_activities(
    bus: MessageBus,
    archive: RunArchive | None,
    llm: LlmProvider,
    *,
    settings: Settings,
    mcp: McpToolCache | None = None,
) -> list[Callable[..., Any]]:
    """All activities of a graph run, bound to the given bus, archive and LLM.

    Args:
        settings: the worker's settings, given to every activity class.
        mcp: the worker process's MCP tool cache; default: one of these activities' own.
    """
    from spindle.worker.activities.agent import AgentActivities
    from spindle.worker.activities.hitl import HitlActivities
    from spindle.worker.activities.lifecycle import LifecycleActivities
    from spindle.worker.activities.map_items import item_activities
    from spindle.worker.activities.nodes import NodeActivities
    from spindle.worker.activities.run_start import RunStartActivities
    from spindle.worker.offerings import load_offerings

    load_offerings()  # the node types and tools the activities look up by name
    nodes = NodeActivities(bus, archive, settings=settings)
    agent = AgentActivities(bus, archive, llm, settings=settings, mcp=mcp)
    hitl = HitlActivities(bus, archive, settings=settings)
    lifecycle = LifecycleActivities(bus, archive, settings=settings)
    run_start = RunStartActivities(bus, archive, settings=settings)
    return [
        nodes.execute_node,
        agent.llm_turn,
        agent.tool_call,
        hitl.request_input,
        hitl.accept_input,
        hitl.expire_input,
        lifecycle.finish_run,
        lifecycle.post_message,
        *item_activities(bus, archive, settings=settings, llm=llm),
        run_start.record_run_start,
    ]
