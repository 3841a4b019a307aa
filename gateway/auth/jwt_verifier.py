"""Bearer JWTs: HS256 with a shared secret, RS256 with a PEM key or a JWKS URL.

The issuer and audience are checked when configured; ``exp`` always is. The
tenant comes from a configurable claim (``Settings.jwt_tenant_claim``), the
user from ``sub`` and the roles from ``Settings.jwt_roles_claim``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import jwt

from spindle.shared.contracts.errors import Unauthorized
from spindle.shared.contracts.identity import Identity
from spindle.shared.platform.settings import Settings

log = logging.getLogger(__name__)

LEEWAY_SECONDS = 30


class JwtVerifier:
    """Verifies bearer JWTs against the configured keys."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._jwks = (
            jwt.PyJWKClient(settings.jwt_jwks_url, cache_keys=True, lifespan=300)
            if settings.jwt_jwks_url
            else None
        )

    @property
    def configured(self) -> bool:
        s = self._settings
        return bool(s.jwt_secret or s.jwt_public_key or s.jwt_jwks_url)

    async def verify(self, token: str) -> Identity:
        """The identity a valid token carries.

        Raises:
            Unauthorized: bad signature, expired, wrong issuer/audience, unknown
                algorithm or key, or no tenant claim.
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"the bearer token is not a valid JWT: {exc}") from None
        algorithm = header.get("alg")
        if algorithm not in self._settings.jwt_algorithms:
            raise Unauthorized(f"JWT algorithm {algorithm!r} is not accepted")
        key = await self._key_for(algorithm, token)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                issuer=self._settings.jwt_issuer,
                audience=self._settings.jwt_audience,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"the bearer token was refused: {exc}") from None
        return self._identity(claims)

    async def _key_for(self, algorithm: str, token: str) -> Any:
        s = self._settings
        if algorithm == "HS256":
            if not s.jwt_secret:
                raise Unauthorized("HS256 tokens are not accepted here")
            return s.jwt_secret
        if s.jwt_public_key:
            return s.jwt_public_key
        if self._jwks is not None:
            jwks = self._jwks
            try:
                # PyJWKClient fetches over blocking urllib (cached afterwards).
                signing_key = await asyncio.to_thread(jwks.get_signing_key_from_jwt, token)
            except jwt.PyJWTError as exc:
                raise Unauthorized(f"no signing key for the bearer token: {exc}") from None
            return signing_key.key
        raise Unauthorized("RS256 tokens are not accepted here")

    def _identity(self, claims: dict[str, Any]) -> Identity:
        s = self._settings
        tenant = claims.get(s.jwt_tenant_claim)
        if not isinstance(tenant, str) or not tenant:
            raise Unauthorized(f"the bearer token has no '{s.jwt_tenant_claim}' claim")
        roles = claims.get(s.jwt_roles_claim) or []
        if isinstance(roles, str):
            roles = roles.split()
        return Identity(
            tenant_id=tenant,
            user_id=str(claims["sub"]),
            roles=tuple(str(role) for role in roles if isinstance(role, str)),
            method="jwt",
            expires_at=int(claims["exp"]),
        )
