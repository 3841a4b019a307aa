"""Webhook signatures: the Standard Webhooks convention, checked against the
specification's own example (standard-webhooks README) and its secret rules."""

from __future__ import annotations

import pytest

from spindle.shared.platform.webhook_signature import (
    MASKED_SECRET,
    new_secret,
    secret_key,
    signature,
    signature_headers,
)

pytestmark = pytest.mark.unit

# The example of the Standard Webhooks specification: any receiver library
# that follows it accepts what Spindle signs.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_specifications_example_signs_the_same() -> None:
    assert signature(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE
    assert signature_headers(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": str(SPEC_TIMESTAMP),
        "webhook-signature": SPEC_SIGNATURE,
    }


def test_any_change_to_id_timestamp_or_body_changes_the_signature() -> None:
    for changed in (
        signature(SPEC_SECRET, SPEC_ID + "x", SPEC_TIMESTAMP, SPEC_BODY),
        signature(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP + 1, SPEC_BODY),
        signature(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY + b" "),
        signature(new_secret(), SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY),
    ):
        assert changed != SPEC_SIGNATURE


def test_generated_secrets_are_whsec_32_random_bytes() -> None:
    first, second = new_secret(), new_secret()
    assert first.startswith("whsec_") and first != second
    assert len(secret_key(first)) == 32


@pytest.mark.parametrize(
    ("secret", "problem"),
    [
        ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "must start with 'whsec_'"),
        ("whsec_not base64!", "followed by base64"),
        ("whsec_c2hvcnQ=", "24 to 64 bytes"),
        (MASKED_SECRET, "followed by base64"),
    ],
)
def test_bad_secrets_are_refused_without_repeating_them(secret: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as info:
        secret_key(secret)
    assert secret not in str(info.value)
