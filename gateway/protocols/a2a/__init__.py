"""Spindle as an A2A agent (a2a-sdk 1.3.0; protocol 1.0 and 0.3).

Importing the package installs the bridge (``protocols.jsonrpc.registry.A2A_BRIDGE``)
that answers every non-``tasks.*`` JSON-RPC method on ``POST /`` and
``POST /tasks``; ``install_a2a(app)`` adds the public agent-card routes.
"""

from __future__ import annotations

from fastapi import FastAPI

from spindle.gateway.protocols.a2a import agent_card
from spindle.gateway.protocols.a2a.bridge import BRIDGE


def install_a2a(app: FastAPI) -> None:
    """Serve the agent card and bind the bridge to ``app``'s clients."""
    app.include_router(agent_card.router)
    BRIDGE.bind(app)


__all__ = ["BRIDGE", "install_a2a"]
