"""Stream tokens: scoped to one run, read-only, expiring, unforgeable."""

from __future__ import annotations

import pytest

from spindle.gateway.auth.stream_tokens import StreamTokenSigner, looks_like_stream_token
from spindle.shared.contracts.identity import Identity

pytestmark = pytest.mark.unit

ALICE = Identity(tenant_id="tenant-a", user_id="alice", roles=("admin",), method="api_key")
NOW = 1_800_000_000.0


def test_a_token_carries_tenant_user_and_run_but_no_roles() -> None:
    signer = StreamTokenSigner("s3cret", ttl_seconds=300)
    token, expires = signer.issue(ALICE, "run-1", now=NOW)
    assert looks_like_stream_token(token)
    assert expires == int(NOW) + 300
    identity = signer.verify(token, now=NOW + 299)
    assert identity == Identity(
        tenant_id="tenant-a", user_id="alice", method="stream_token", run_scope="run-1"
    )
    assert identity.roles == ()


def test_an_expired_token_is_refused() -> None:
    signer = StreamTokenSigner("s3cret", ttl_seconds=60)
    token, _ = signer.issue(ALICE, "run-1", now=NOW)
    assert signer.verify(token, now=NOW + 60) is None


def test_another_secret_or_a_changed_payload_is_refused() -> None:
    token, _ = StreamTokenSigner("s3cret", 60).issue(ALICE, "run-1", now=NOW)
    assert StreamTokenSigner("other", 60).verify(token, now=NOW) is None
    prefix, _payload, signature = token.split(".")
    forged_payload = (
        StreamTokenSigner("attacker", 60).issue(ALICE, "run-2", now=NOW)[0].split(".")[1]
    )
    assert (
        StreamTokenSigner("s3cret", 60).verify(f"{prefix}.{forged_payload}.{signature}", now=NOW)
        is None
    )


@pytest.mark.parametrize("garbage", ["st1.", "st1.abc", "st1.a.b.c", "st1.!!!.???", "st1..", ""])
def test_malformed_tokens_are_refused_not_crashed_on(garbage: str) -> None:
    assert StreamTokenSigner("s3cret", 60).verify(garbage, now=NOW) is None
