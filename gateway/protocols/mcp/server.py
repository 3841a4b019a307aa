"""The MCP server object: graph tools (``tools``) and their Tasks (``tasks``).

The SDK derives the advertised capabilities from the handlers it knows; the
``tasks`` capability (MCP 2025-11-25) is added here because the SDK serves no
``tasks/*`` itself (spindle.gateway.protocols.mcp.tasks serves them).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

from spindle.gateway.protocols.mcp.tasks import (
    CAPABILITY,
    cancel_task,
    get_task,
    list_tasks,
    task_result,
    tasks_middleware,
)
from spindle.gateway.protocols.mcp.tools import call_tool, list_tools


class _TasksServer(Server[dict[str, Any]]):
    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        return capabilities.model_copy(update={"tasks": CAPABILITY})


def build_server() -> Server[dict[str, Any]]:
    """The MCP server (one per gateway process)."""
    server = _TasksServer(
        "spindle",
        instructions="Each tool runs one of your registered Spindle graphs.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware.append(tasks_middleware)
    server.add_request_handler("tasks/get", types.GetTaskRequestParams, get_task)
    server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, task_result)
    server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, cancel_task)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, list_tasks)
    return server
