"""Bearer JWTs: HS256 and RS256 (PEM and JWKS), issuer, audience, expiry, tenant claim."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from spindle.gateway.auth.jwt_verifier import JwtVerifier
from spindle.shared.contracts.errors import Unauthorized
from spindle.shared.platform.settings import Settings

pytestmark = pytest.mark.unit

ISSUER = "https://issuer.test"
AUDIENCE = "spindle"


def claims(**extra: Any) -> dict[str, Any]:
    base = {
        "sub": "alice",
        "tenant": "tenant-a",
        "roles": ["admin"],
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": int(time.time()) + 300,
    }
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def settings(**fields: Any) -> Settings:
    return Settings(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, **fields)


async def test_hs256_token_maps_to_tenant_user_and_roles() -> None:
    verifier = JwtVerifier(settings(jwt_secret="k" * 32))
    identity = await verifier.verify(jwt.encode(claims(), "k" * 32, algorithm="HS256"))
    assert (identity.tenant_id, identity.user_id, identity.roles) == (
        "tenant-a",
        "alice",
        ("admin",),
    )
    assert identity.method == "jwt"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"iss": "https://evil.test"}, "issuer"),
        ({"aud": "someone-else"}, "audience"),
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"tenant": None}, "tenant"),
        ({"sub": None}, "sub"),
    ],
)
async def test_hs256_tokens_with_bad_claims_are_refused(
    change: dict[str, Any], reason: str
) -> None:
    verifier = JwtVerifier(settings(jwt_secret="k" * 32))
    with pytest.raises(Unauthorized) as refused:
        await verifier.verify(jwt.encode(claims(**change), "k" * 32, algorithm="HS256"))
    assert reason in refused.value.detail.lower()


async def test_a_token_signed_with_another_secret_is_refused() -> None:
    verifier = JwtVerifier(settings(jwt_secret="k" * 32))
    with pytest.raises(Unauthorized, match="Signature"):
        await verifier.verify(jwt.encode(claims(), "x" * 32, algorithm="HS256"))


async def test_rs256_with_a_pem_public_key(rsa_key: rsa.RSAPrivateKey) -> None:
    verifier = JwtVerifier(settings(jwt_public_key=public_pem(rsa_key)))
    identity = await verifier.verify(jwt.encode(claims(sub="bob"), rsa_key, algorithm="RS256"))
    assert identity.user_id == "bob"


async def test_hs256_is_refused_when_only_rs256_is_configured(rsa_key: rsa.RSAPrivateKey) -> None:
    # The classic alg-confusion attack: an HS256 token "signed" with the public key.
    pem = public_pem(rsa_key)
    verifier = JwtVerifier(settings(jwt_public_key=pem))
    forged = jwt.api_jws.PyJWS().encode(json.dumps(claims()).encode(), b"x" * 32, algorithm="HS256")
    with pytest.raises(Unauthorized, match="HS256"):
        await verifier.verify(forged)


async def test_algorithms_outside_the_allow_list_are_refused() -> None:
    verifier = JwtVerifier(settings(jwt_secret="k" * 32, jwt_algorithms=["RS256"]))
    with pytest.raises(Unauthorized, match="not accepted"):
        await verifier.verify(jwt.encode(claims(), "k" * 32, algorithm="HS256"))
    unsigned = jwt.encode(claims(), None, algorithm="none")
    with pytest.raises(Unauthorized, match="not accepted"):
        await verifier.verify(unsigned)


@pytest.fixture
def jwks_server(rsa_key: rsa.RSAPrivateKey) -> Iterator[str]:
    """A real JWKS endpoint on loopback (the identity provider a test cannot reach)."""
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key()))
    body = json.dumps({"keys": [{**jwk, "kid": "key-1", "use": "sig", "alg": "RS256"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/.well-known/jwks.json"
    server.shutdown()
    server.server_close()


async def test_rs256_keys_come_from_jwks_by_kid(
    rsa_key: rsa.RSAPrivateKey, jwks_server: str
) -> None:
    verifier = JwtVerifier(settings(jwt_jwks_url=jwks_server))
    token = jwt.encode(claims(), rsa_key, algorithm="RS256", headers={"kid": "key-1"})
    assert (await verifier.verify(token)).tenant_id == "tenant-a"
    unknown_kid = jwt.encode(claims(), rsa_key, algorithm="RS256", headers={"kid": "key-9"})
    with pytest.raises(Unauthorized, match="signing key"):
        await verifier.verify(unknown_kid)
