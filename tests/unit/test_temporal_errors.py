"""How Temporal's RPC failures reach clients: a retryable 503, a 404, or a 500."""

from __future__ import annotations

import pytest
from temporalio.service import RPCError, RPCStatusCode

from spindle.gateway.http.temporal_errors import temporal_error
from spindle.shared.contracts.errors import NotFound, Unavailable

pytestmark = pytest.mark.unit


def rpc_error(message: str, status: RPCStatusCode) -> RPCError:
    return RPCError(message, status, b"")


def test_a_query_with_no_worker_polling_is_a_retryable_503() -> None:
    # What Temporal answers a query of a run whose task queue has no poller.
    error = temporal_error(
        rpc_error(
            "no poller seen for task queue recently, worker may be down",
            RPCStatusCode.FAILED_PRECONDITION,
        )
    )
    assert isinstance(error, Unavailable)
    assert error.status == 503
    assert "no worker polls" in str(error)


def test_unavailable_and_not_found_keep_their_meaning() -> None:
    assert isinstance(temporal_error(rpc_error("down", RPCStatusCode.UNAVAILABLE)), Unavailable)
    assert isinstance(temporal_error(rpc_error("gone", RPCStatusCode.NOT_FOUND)), NotFound)


def test_another_failed_precondition_stays_a_server_error() -> None:
    error = temporal_error(rpc_error("something else", RPCStatusCode.FAILED_PRECONDITION))
    assert type(error).__name__ == "SpindleError"
    assert error.status == 500
