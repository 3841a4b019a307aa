"""Where the gateway is and who the client is: ``ClientConfig``.

Credentials are an API key (``spk_…``, sent as ``X-API-Key``) or a bearer token
(a JWT, sent as ``Authorization: Bearer``); with neither, requests carry no
credentials (a gateway with auth off, as under ``spindle dev``).
``ClientConfig.from_env()`` reads ``SPINDLE_URL``, ``SPINDLE_API_KEY`` and
``SPINDLE_TOKEN``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from spindle.client.backoff import BackoffPolicy

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "SPINDLE_URL"
API_KEY_ENV = "SPINDLE_API_KEY"
TOKEN_ENV = "SPINDLE_TOKEN"


@dataclass(frozen=True)
class ClientConfig:
    """How to reach and authenticate to a Spindle gateway.

    Attributes:
        base_url: the gateway's address, e.g. ``http://127.0.0.1:8000``.
        api_key: an API key from ``spindle keys create``.
        bearer_token: a JWT (ignored when ``api_key`` is set).
        timeout: seconds for connecting and for each request.
        stream_read_timeout: seconds a stream may stay silent before it counts as
            broken and is reconnected (the gateway sends keep-alives when idle).
        backoff: the stream's reconnection policy.
        user_agent: sent as ``User-Agent``.
    """

    base_url: str = DEFAULT_URL
    api_key: str | None = None
    bearer_token: str | None = None
    timeout: float = 30.0
    stream_read_timeout: float = 60.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    user_agent: str = "spindle-python-client"

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: object
    ) -> ClientConfig:
        """A config from ``SPINDLE_URL``, ``SPINDLE_API_KEY`` and ``SPINDLE_TOKEN``.

        Args:
            environ: where to read the variables (default: the process environment).
            **overrides: fields that win over the environment (None values ignored).
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {
            "base_url": env.get(URL_ENV) or DEFAULT_URL,
            "api_key": env.get(API_KEY_ENV) or None,
            "bearer_token": env.get(TOKEN_ENV) or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]

    def headers(self) -> dict[str, str]:
        """The headers every request carries (credentials, user agent)."""
        headers = {"User-Agent": self.user_agent}
        if self.api_key:
            headers["X-API-Key"] = self.api_key
        elif self.bearer_token:
            headers["Authorization"] = f"Bearer {self.bearer_token}"
        return headers

    def http_client(self, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
        """A new ``httpx.AsyncClient`` on ``base_url`` with these credentials."""
        return httpx.AsyncClient(
            base_url=self.base_url.rstrip("/"),
            headers=self.headers(),
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
            transport=transport,
        )
