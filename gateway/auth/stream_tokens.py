"""Short-lived signed stream tokens for browsers.

``EventSource`` cannot send headers, so a browser streams with a token in the
query string. To keep that token harmless when it leaks (proxy logs, browser
history), it is scoped to one run, read-only and expires within minutes. It
reads ``st1.<payload>.<signature>``: base64url JSON ``{"t": tenant, "u": user,
"w": workflow id, "exp": epoch seconds, "k": minting API key id}`` signed with
HMAC-SHA256 under the server's ``auth_secret``. Any gateway process verifies it.

A token dies with what minted it: a JWT-minted token expires no later than the
JWT, and the authenticator refuses a key-minted token once its key is revoked
(``k`` is checked against the key store like the key itself would be).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import orjson

from spindle.shared.contracts.identity import Identity

TOKEN_PREFIX = "st1."


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def looks_like_stream_token(token: str) -> bool:
    return token.startswith(TOKEN_PREFIX)


class StreamTokenSigner:
    """Signs and verifies stream tokens with one server secret."""

    def __init__(self, secret: str, ttl_seconds: int) -> None:
        self._key = hashlib.sha256(b"spindle-stream-token\0" + secret.encode()).digest()
        self.ttl_seconds = ttl_seconds

    def issue(
        self, identity: Identity, workflow_id: str, *, now: float | None = None
    ) -> tuple[str, int]:
        """A token that lets ``identity`` read ``workflow_id``'s messages; and its expiry."""
        expires = int(now if now is not None else time.time()) + self.ttl_seconds
        if identity.expires_at is not None:
            expires = min(expires, identity.expires_at)
        claims: dict[str, str | int] = {
            "t": identity.tenant_id,
            "u": identity.user_id,
            "w": workflow_id,
            "exp": expires,
        }
        if identity.key_id is not None:
            claims["k"] = identity.key_id
        payload = _b64(orjson.dumps(claims))
        return f"{TOKEN_PREFIX}{payload}.{self._sign(payload)}", expires

    def verify(self, token: str, *, now: float | None = None) -> Identity | None:
        """The read-only identity the token carries; None if forged, malformed or expired."""
        try:
            payload, signature = token[len(TOKEN_PREFIX) :].split(".", 1)
        except ValueError:
            return None
        # compare_digest raises TypeError on non-ASCII str: a forged token is refused, not a 500.
        if not (payload.isascii() and signature.isascii()):
            return None
        if not hmac.compare_digest(signature, self._sign(payload)):
            return None
        try:
            claims = orjson.loads(_unb64(payload))
            expires = int(claims["exp"])
            tenant, user, workflow_id = str(claims["t"]), str(claims["u"]), str(claims["w"])
            key_id = claims.get("k")
            identity = Identity(
                tenant_id=tenant,
                user_id=user,
                method="stream_token",
                run_scope=workflow_id,
                key_id=None if key_id is None else str(key_id),
                expires_at=expires,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if expires <= (now if now is not None else time.time()):
            return None
        return identity

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())
