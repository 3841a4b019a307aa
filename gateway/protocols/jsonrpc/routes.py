"""JSON-RPC 2.0 over HTTP: ``POST /`` and ``POST /tasks`` (seed 003), and WebSocket ``/ws``.

Both paths answer the same methods: seed 003's ``tasks.*`` and, through the
A2A bridge, the A2A protocol's. The body is read raw (not through FastAPI's
validation) because JSON-RPC reports its own parse and request errors.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

# Imported for their registrations into spindle.gateway.protocols.jsonrpc.registry.
from spindle.gateway.protocols.jsonrpc import (  # noqa: F401
    dispatcher,
    task_execution,
    task_methods,
    task_queries,
)
from spindle.gateway.protocols.jsonrpc.websocket import PATH as WS_PATH
from spindle.gateway.protocols.jsonrpc.websocket import jsonrpc_websocket

router = APIRouter(tags=["json-rpc"])
# The same methods over WebSocket, streams pushed as notifications (websocket.py).
router.add_api_websocket_route(WS_PATH, jsonrpc_websocket)


@router.post("/", include_in_schema=False)
async def rpc_root(request: Request) -> Response:
    """Answer a JSON-RPC 2.0 request, batch or notification."""
    return await dispatcher.answer(request)


@router.post("/tasks", include_in_schema=False)
async def rpc_tasks(request: Request) -> Response:
    """The legacy JSON-RPC endpoint of seed 003 (same as ``POST /``)."""
    return await dispatcher.answer(request)
