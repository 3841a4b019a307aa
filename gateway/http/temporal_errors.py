"""Temporal's own failures, as the ``spindle.shared.contracts.errors`` a client sees.

The worker's failures arrive typed (``from_application_error``); these are the
ones Temporal itself raises: RPC errors of the frontend, a client that never
connected, and a handler the run's workflow code does not define. The Temporal
SDK gives the last two no type of its own, so this module is the one place that
reads the SDK's wording, each check named for what it finds.
"""

from __future__ import annotations

from temporalio.client import WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from spindle.shared.contracts.errors import NotFound, SpindleError, Unavailable

# Temporal answers these when it cannot serve the call right now (server down,
# overloaded, or the call timed out): the client should retry, not give up.
_TEMPORAL_RETRYABLE = frozenset(
    {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.RESOURCE_EXHAUSTED}
)
# The SDK's wording (temporalio.worker._workflow_instance, temporalio.bridge):
# no exception type carries these facts.
_NO_POLLER = "no poller"
_CONNECT_FAILED = "Failed client connect"
_HANDLER_MISSING = "expected but not found"


def temporal_error(exc: RPCError, *, what: str = "Temporal") -> SpindleError:
    """Translate a Temporal RPC failure into the client-facing error."""
    if exc.status in _TEMPORAL_RETRYABLE:
        return Unavailable(f"{what} is unavailable: {exc.message}", retry_after=2)
    if exc.status == RPCStatusCode.NOT_FOUND:
        return NotFound(exc.message)
    if exc.status == RPCStatusCode.FAILED_PRECONDITION and _NO_POLLER in exc.message:
        # A query to a run whose task queue no worker polls (all of them down or
        # being deployed): the run is fine, the answer has to wait for a worker.
        return Unavailable(f"no worker polls this run's task queue: {exc.message}", retry_after=5)
    return SpindleError(f"{what} call failed: {exc.message}")


def is_temporal_connect_error(exc: BaseException) -> bool:
    """The lazy Temporal client raises a bare RuntimeError until it first connects."""
    return isinstance(exc, RuntimeError) and str(exc).startswith(_CONNECT_FAILED)


def is_missing_handler(failure: BaseException | None) -> bool:
    """The run's workflow code has no handler of that name (a run started
    before the handler existed): a refused update's cause or a failed query."""
    if isinstance(failure, ApplicationError | WorkflowQueryFailedError):
        return _HANDLER_MISSING in str(failure)
    return False
