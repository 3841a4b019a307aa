"""Turn a request's credentials into an ``Identity`` (or a 401 problem).

Credentials, first found wins:

- ``X-API-Key: spk_…``;
- ``Authorization: Bearer <token>``: an API key (``spk_…``), a stream token
  (``st1.…``) or else a JWT;
- ``?access_token=<token>`` on GET requests only (EventSource and
  ``@vertesia/client`` streams cannot send headers); the access log masks it.

With ``Settings.auth_disabled`` every request acts as the dev identity.
Verified API keys are cached for ``Settings.api_key_cache_seconds`` per
process so a request does not cost a Mongo round trip; a revoked key stops
working within that time, and so does every stream token it minted. Invalid
keys are cached too (least recently used evicted first, ``KEY_CACHE_MAX``), and
failed authentications are throttled per client address (``auth.throttle``):
past the limit every request of the address is refused, a cached valid key's too.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from fastapi import Request

from spindle.gateway.auth.jwt_verifier import JwtVerifier
from spindle.gateway.auth.stream_tokens import StreamTokenSigner, looks_like_stream_token
from spindle.gateway.auth.throttle import AuthFailureThrottle
from spindle.shared.contracts.errors import Unauthorized, Unavailable
from spindle.shared.contracts.identity import DEV_IDENTITY, Identity
from spindle.shared.platform.settings import Settings
from spindle.shared.store.api_keys import ApiKeyStore, key_hash, looks_like_api_key

log = logging.getLogger(__name__)

KEY_CACHE_MAX = 10_000
MAX_TOKEN_CHARS = 8192


class AuthConfigError(RuntimeError):
    """The settings cannot run the gateway with auth on."""


class Authenticator:
    """Resolves callers; one per gateway process."""

    def __init__(
        self,
        settings: Settings,
        *,
        keys: ApiKeyStore | None,
        jwt_verifier: JwtVerifier | None = None,
        throttle: AuthFailureThrottle | None = None,
    ) -> None:
        self._settings = settings
        self._keys = keys
        self._jwt = jwt_verifier or JwtVerifier(settings)
        if settings.auth_disabled:
            secret = settings.auth_secret or "spindle-dev-only-secret"
        elif not settings.auth_secret:
            raise AuthConfigError(
                "SPINDLE_AUTH_SECRET must be set when auth is on (it signs stream tokens); "
                "or set SPINDLE_AUTH_DISABLED=true for local development only"
            )
        else:
            secret = settings.auth_secret
        self.stream_tokens = StreamTokenSigner(secret, settings.stream_token_ttl_seconds)
        self._throttle = throttle
        # key hash → (valid until, identity or None for an invalid key); LRU order.
        self._key_cache: OrderedDict[str, tuple[float, Identity | None]] = OrderedDict()
        # key id → (valid until, still active): the keys behind stream tokens.
        self._key_alive: OrderedDict[str, tuple[float, bool]] = OrderedDict()

    @property
    def disabled(self) -> bool:
        return self._settings.auth_disabled

    async def authenticate(self, request: Request) -> Identity:
        """The caller of ``request``.

        Raises:
            Unauthorized: no credentials, or credentials that do not verify.
            RateLimited: this client address failed too often (``auth.throttle``).
            Unavailable: the key store (MongoDB) cannot be reached.
        """
        if self._settings.auth_disabled:
            return DEV_IDENTITY
        token = self._credential(request)
        if token is None:
            raise Unauthorized(
                "credentials required: send 'Authorization: Bearer <API key or JWT>' or "
                "'X-API-Key: <API key>'"
            )
        client = request.client.host if request.client is not None else "unknown"
        if self._throttle is not None:
            # Before the cache too: past the limit, every request of the address
            # gets 429 until the window ends, a valid key's included (as documented).
            await self._throttle.check(client)
        cached = self._cached(key_hash(token)) if looks_like_api_key(token) else None
        if cached is not None and cached[1] is not None:
            return cached[1]
        try:
            return await self._verify(token)
        except Unauthorized:
            if self._throttle is not None:
                await self._throttle.failed(client)
            raise

    async def _verify(self, token: str) -> Identity:
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthorized("the credential is too long")
        if looks_like_api_key(token):
            return await self._api_key(token)
        if looks_like_stream_token(token):
            identity = self.stream_tokens.verify(token)
            if identity is None:
                raise Unauthorized("the stream token is invalid or has expired")
            if identity.key_id is not None and not await self._key_active(identity):
                raise Unauthorized("the API key that minted this stream token has been revoked")
            return identity
        if not self._jwt.configured:
            raise Unauthorized(
                "the credential is not a Spindle API key, and JWTs are not configured"
            )
        return await self._jwt.verify(token)

    def _credential(self, request: Request) -> str | None:
        api_key = request.headers.get("x-api-key")
        if api_key:
            return api_key.strip()
        authorization = request.headers.get("authorization")
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise Unauthorized("the Authorization header must read 'Bearer <token>'")
            return value.strip()
        if request.method == "GET":
            token = request.query_params.get("access_token")
            if token:
                return token
        return None

    def _cached(self, digest: str) -> tuple[float, Identity | None] | None:
        entry = self._key_cache.get(digest)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            del self._key_cache[digest]
            return None
        self._key_cache.move_to_end(digest)
        return entry

    def _remember(self, digest: str, identity: Identity | None) -> None:
        expires = time.monotonic() + self._settings.api_key_cache_seconds
        self._key_cache[digest] = (expires, identity)
        self._key_cache.move_to_end(digest)
        while len(self._key_cache) > KEY_CACHE_MAX:
            self._key_cache.popitem(last=False)

    async def _api_key(self, key: str) -> Identity:
        digest = key_hash(key)
        cached = self._cached(digest)
        if cached is not None:
            identity = cached[1]
        else:
            if self._keys is None:
                raise Unauthorized("API keys are not accepted here")
            try:
                identity = await self._keys.verify(key)
            except Exception as exc:
                log.warning("API key lookup failed: %s", exc)
                raise Unavailable("the key store is unavailable; retry", retry_after=2) from exc
            self._remember(digest, identity)
        if identity is None:
            raise Unauthorized("the API key is invalid or has been revoked")
        return identity

    async def _key_active(self, identity: Identity) -> bool:
        """Whether the key that minted a stream token is still valid (cached like keys)."""
        key_id = identity.key_id
        assert key_id is not None
        now = time.monotonic()
        entry = self._key_alive.get(key_id)
        if entry is not None and entry[0] > now:
            self._key_alive.move_to_end(key_id)
            return entry[1]
        if self._keys is None:
            return False
        try:
            active = await self._keys.is_active(
                key_id, tenant_id=identity.tenant_id, user_id=identity.user_id
            )
        except Exception as exc:
            log.warning("API key lookup failed: %s", exc)
            raise Unavailable("the key store is unavailable; retry", retry_after=2) from exc
        self._key_alive[key_id] = (now + self._settings.api_key_cache_seconds, active)
        self._key_alive.move_to_end(key_id)
        while len(self._key_alive) > KEY_CACHE_MAX:
            self._key_alive.popitem(last=False)
        return active
