"""A small MCP server for the tests, built on the official ``mcp`` SDK's server API.

``python tests/mcp_echo_server.py [--log FILE]`` serves stdio;
``--http PORT`` serves streamable HTTP on 127.0.0.1:PORT at ``/mcp``.
Each start appends a line to ``--log`` (a test counts the stdio processes started).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer


def build() -> MCPServer:
    server = MCPServer("echo")

    @server.tool()
    def shout(text: str) -> str:
        """Repeat the text in capitals."""
        return text.upper()

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @server.tool()
    def whoami(ctx: Context) -> str:
        """The Authorization header the caller sent (HTTP only)."""
        headers = ctx.headers or {}
        return str(headers.get("authorization", "none"))

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    if args.log is not None:
        with args.log.open("a") as out:
            out.write("started\n")
    server = build()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
