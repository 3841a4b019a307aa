"""The node-type/tool catalog the gateway validates graphs against, cached.

Workers publish their catalog to the archive; the gateway merges it over the
built-in node types and keeps the result a few seconds, so validating a graph
costs no database round trip on a busy gateway.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from spindle.shared.contracts.errors import Unavailable
from spindle.shared.graphs.catalog import Catalog

log = logging.getLogger(__name__)


class CatalogSource(Protocol):
    async def get_catalog(self) -> Catalog | None: ...


class CatalogCache:
    """``Catalog.builtin()`` merged with the workers' published catalog.

    Args:
        source: where workers publish (the run archive).
        ttl_seconds: how long a read stays fresh.
    """

    def __init__(self, source: CatalogSource, *, ttl_seconds: float = 5.0) -> None:
        self._source = source
        self._ttl = ttl_seconds
        self._value: Catalog | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> Catalog:
        """The current catalog.

        Raises:
            Unavailable: the archive cannot be read and nothing is cached; a
                built-in-only catalog would wrongly reject custom node types.
        """
        if self._value is not None and time.monotonic() - self._read_at < self._ttl:
            return self._value
        async with self._lock:
            if self._value is not None and time.monotonic() - self._read_at < self._ttl:
                return self._value
            try:
                published = await self._source.get_catalog()
            except Exception as exc:
                if self._value is not None:
                    log.warning("catalog refresh failed, using the cached one: %s", exc)
                    return self._value
                raise Unavailable("the node catalog cannot be read (archive unavailable)") from exc
            self._value = Catalog.builtin().merged(published or Catalog())
            self._read_at = time.monotonic()
            return self._value

    def invalidate(self) -> None:
        """Forget the cached value (e.g. after a graph or catalog write)."""
        self._read_at = 0.0
