"""The JSON-RPC method registry shared by ``POST /`` and ``POST /tasks``.

CONTRACT (other modules register into it: keep names and semantics).

``tasks.*`` handlers register with :func:`tasks_method`; the A2A module sets
:data:`A2A_BRIDGE` (via :func:`set_a2a_bridge`) at import time and receives
every method that does not start with ``tasks.``. A handler gets the request's
``params`` (always a dict) and an :class:`RpcContext`, returns a JSON-able
result, or raises a ``spindle.shared.contracts.errors.SpindleError`` whose ``jsonrpc_code`` is
the seed 003 code (``ValidationFailed`` → -32602 with ``data`` naming
``field`` and ``reason``: give them as ``errors=[{"field": ..., "reason": ...}]``).
A handler answering a SINGLE request may return :class:`StreamingResult` to
send an SSE response instead of JSON (inside a batch it is refused).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from spindle.gateway.services.callers import Caller
from spindle.gateway.services.state import GatewayState
from spindle.shared.contracts.identity import Identity
from spindle.shared.tasks.store import TaskStore

TASKS_PREFIX = "tasks."


@dataclass(frozen=True)
class RpcContext:
    """What a handler may use besides its params.

    Attributes:
        request: the HTTP request carrying the call (or the batch).
        caller: the authenticated caller (every task it touches is its tenant's),
            with the gateway's state, as the service layer takes it.
        envelope: the whole JSON-RPC request object (``metadata``/``configuration``
            live beside ``params`` in seed 003's streaming and push requests).
        in_batch: true when the call is a member of a batch (no streaming then).
    """

    request: Request
    caller: Caller
    envelope: dict[str, Any]
    in_batch: bool = False

    @property
    def identity(self) -> Identity:
        return self.caller.identity

    @property
    def state(self) -> GatewayState:
        return self.caller.state


Handler = Callable[[dict[str, Any], RpcContext], Awaitable[Any]]

TASK_METHODS: dict[str, Handler] = {}


def tasks_method(name: str) -> Callable[[Handler], Handler]:
    """Register ``handler`` as the JSON-RPC method ``name`` (must start with ``tasks.``)."""
    if not name.startswith(TASKS_PREFIX):
        raise ValueError(f"task methods start with {TASKS_PREFIX!r}: {name!r}")

    def register(handler: Handler) -> Handler:
        if name in TASK_METHODS and TASK_METHODS[name] is not handler:
            raise ValueError(f"JSON-RPC method {name!r} registered twice")
        TASK_METHODS[name] = handler
        return handler

    return register


class StreamingResult:
    """A handler's answer to a single request as a raw (SSE) response."""

    def __init__(self, response: Response) -> None:
        self.response = response


class A2ABridge(Protocol):
    """The A2A protocol module, answering every non-``tasks.*`` method."""

    async def handle_single(
        self, request: Request, payload: dict[str, Any], identity: Identity | None
    ) -> Response:
        """Answer one A2A request object (JSON or SSE)."""
        ...

    async def handle_in_batch(
        self, payload: dict[str, Any], identity: Identity | None, request: Request | None = None
    ) -> dict[str, Any] | None:
        """Answer one A2A member of a batch (None for a notification)."""
        ...


A2A_BRIDGE: A2ABridge | None = None


def set_a2a_bridge(bridge: A2ABridge | None) -> None:
    """Install (or remove) the A2A bridge the dispatcher forwards to."""
    global A2A_BRIDGE
    A2A_BRIDGE = bridge


def get_a2a_bridge() -> A2ABridge | None:
    return A2A_BRIDGE


async def task_store(ctx: RpcContext) -> TaskStore:
    """The app's task store (over the archive's database), its indexes ensured."""
    store = ctx.state.tasks
    await store.ensure_indexes()
    return store
