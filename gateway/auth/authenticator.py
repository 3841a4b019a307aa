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
working within that time.
"""

from __future__ import annotations

import logging
import time

from fastapi import Request

from spindle.gateway.auth.jwt_verifier import JwtVerifier
from spindle.gateway.auth.stream_tokens import StreamTokenSigner, looks_like_stream_token
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
        self._key_cache: dict[str, tuple[float, Identity | None]] = {}

    @property
    def disabled(self) -> bool:
        return self._settings.auth_disabled

    async def authenticate(self, request: Request) -> Identity:
        """The caller of ``request``.

        Raises:
            Unauthorized: no credentials, or credentials that do not verify.
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
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthorized("the credential is too long")
        if looks_like_api_key(token):
            return await self._api_key(token)
        if looks_like_stream_token(token):
            identity = self.stream_tokens.verify(token)
            if identity is None:
                raise Unauthorized("the stream token is invalid or has expired")
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

    async def _api_key(self, key: str) -> Identity:
        digest = key_hash(key)
        now = time.monotonic()
        cached = self._key_cache.get(digest)
        if cached is not None and cached[0] > now:
            identity = cached[1]
        else:
            if self._keys is None:
                raise Unauthorized("API keys are not accepted here")
            try:
                identity = await self._keys.verify(key)
            except Exception as exc:
                log.warning("API key lookup failed: %s", exc)
                raise Unavailable("the key store is unavailable; retry", retry_after=2) from exc
            if len(self._key_cache) >= KEY_CACHE_MAX:
                self._key_cache.clear()
            self._key_cache[digest] = (now + self._settings.api_key_cache_seconds, identity)
        if identity is None:
            raise Unauthorized("the API key is invalid or has been revoked")
        return identity
