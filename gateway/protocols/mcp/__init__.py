"""Spindle as an MCP server at ``/mcp`` (the official ``mcp`` SDK, streamable HTTP).

``install_mcp(app)`` adds the route; ``mcp_sessions(state)`` runs the SDK's session
manager for the app's lifespan. docs/protocols/mcp.md describes the mapping.
"""

from __future__ import annotations

from spindle.gateway.protocols.mcp.endpoint import install_mcp, mcp_sessions

__all__ = ["install_mcp", "mcp_sessions"]
