"""Temporal client identities in the errors users see (issue 28, low: ``pid@host``)."""

from __future__ import annotations

import socket

import pytest

from spindle.shared.temporal.closed_runs import public_identity

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("identity", "shown"),
    [
        (f"4242@{socket.gethostname()}", "Spindle"),  # a worker or gateway (SDK default)
        ("temporal-cli:ops@bastion-7", "temporal-cli:ops"),  # an operator, without the host
        ("history-service", "history-service"),
        ("", ""),
    ],
)
def test_a_close_reason_names_no_process_or_host(identity: str, shown: str) -> None:
    assert public_identity(identity) == shown
