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
        tenant_id="tenant-a",
        user_id="alice",
        method="stream_token",
        run_scope="run-1",
        expires_at=expires,
    )
    assert identity.roles == ()


def test_a_token_names_the_key_that_minted_it_so_it_dies_with_the_key() -> None:
    signer = StreamTokenSigner("s3cret", ttl_seconds=300)
    keyed = ALICE.model_copy(update={"key_id": "0123456789abcdef"})
    token, _ = signer.issue(keyed, "run-1", now=NOW)
    identity = signer.verify(token, now=NOW)
    assert identity is not None
    assert identity.key_id == "0123456789abcdef"


def test_a_token_expires_no_later_than_the_jwt_that_minted_it() -> None:
    signer = StreamTokenSigner("s3cret", ttl_seconds=300)
    short_jwt = ALICE.model_copy(update={"method": "jwt", "expires_at": int(NOW) + 20})
    token, expires = signer.issue(short_jwt, "run-1", now=NOW)
    assert expires == int(NOW) + 20
    assert signer.verify(token, now=NOW + 19) is not None
    assert signer.verify(token, now=NOW + 20) is None


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


@pytest.mark.parametrize(
    "garbage",
    ["st1.", "st1.abc", "st1.a.b.c", "st1.!!!.???", "st1..", "", "st1.abc.é", "st1.é.abc"],
)
def test_malformed_tokens_are_refused_not_crashed_on(garbage: str) -> None:
    assert StreamTokenSigner("s3cret", 60).verify(garbage, now=NOW) is None
