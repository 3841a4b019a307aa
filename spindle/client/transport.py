"""The HTTP plumbing every client call shares: ``ClientTransport``.

One ``httpx.AsyncClient`` per client (base URL, credentials, timeouts from
``ClientConfig``); an error answer becomes the ``ApiError`` of its status, an
unreachable gateway ``ConnectionFailed``; answers are read into their models.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from spindle.client.config import ClientConfig
from spindle.client.errors import ConnectionFailed, raise_for_status
from spindle.client.models import RunRef, run_ids

M = TypeVar("M", bound=BaseModel)


def segment(value: str) -> str:
    """``value`` escaped as one URL path segment."""
    return quote(value, safe="")


class ClientTransport:
    """Requests to one gateway, as one configured ``httpx.AsyncClient``.

    Args:
        config: where the gateway is and the credentials (default: from the
            environment, see ``ClientConfig.from_env``).
        transport: an httpx transport to use instead of the network (tests).
    """

    def __init__(
        self,
        config: ClientConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config or ClientConfig.from_env()
        self._http = self.config.http_client(transport)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            reply = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ConnectionFailed(
                f"{method} {self.config.base_url}{path}: {exc!s} ({type(exc).__name__})"
            ) from exc
        raise_for_status(reply)
        return reply

    async def _model(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        reply = await self._request(method, path, **kwargs)
        return model.model_validate_json(reply.content)

    async def _run_id(self, run: RunRef) -> tuple[str, str]:
        """``(workflow_id, run_id)``; a bare workflow id is looked up for its run id."""
        workflow_id, run_id = run_ids(run)
        if isinstance(run, str):
            reply = await self._request("GET", f"/runs/{segment(workflow_id)}")
            found = reply.json().get("run_id")
            run_id = found if isinstance(found, str) and found else run_id
        return workflow_id, run_id
