"""Tools that ``tool`` and ``agent`` nodes call.

- ``registry``: the tool registry (``@tool``, ``ToolDef``, ``get_tool``); plug-ins register here;
- ``builtin``: the built-in tools (no network, so the demo runs anywhere);
- ``mcp_client``: the tools of MCP servers an agent node names (the ``mcp`` SDK as the client).
"""
