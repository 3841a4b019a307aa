"""Webhook signatures in the Standard Webhooks convention (standardwebhooks.com).

A secret is ``whsec_`` followed by the base64 of 24 to 64 random bytes. Each
delivery carries three headers: ``webhook-id`` (the same for every retry of one
event, so a receiver can drop duplicates), ``webhook-timestamp`` (Unix seconds
of this attempt, so a receiver can refuse replays) and ``webhook-signature``
(``v1,`` then the base64 of HMAC-SHA256 over ``<id>.<timestamp>.<body>`` keyed
with the secret's bytes). See docs/protocols/outbound.md "Completion webhooks".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
# Shown in place of a secret on every read after the one that created it.
MASKED_SECRET = SECRET_PREFIX + "********"


def new_secret() -> str:
    """A fresh signing secret (``whsec_`` + base64 of 32 random bytes)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret.

    Raises:
        ValueError: not ``whsec_`` + base64 of 24 to 64 bytes (the message says
            which; it never repeats the secret).
    """
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"must start with '{SECRET_PREFIX}'")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"must be '{SECRET_PREFIX}' followed by base64") from exc
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise ValueError(f"must hold {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes of key")
    return key


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,<base64 HMAC-SHA256>``."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of one delivery attempt."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, message_id, timestamp, body),
    }
