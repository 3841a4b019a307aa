"""The one way Spindle opens a MongoDB client.

Every store (archive, API keys, files, offloaded payloads) connects alike:
aware UTC datetimes, and short timeouts so a MongoDB that is down or stops
answering costs a request a few seconds, never a hang (runs go on and the
archive outbox catches up later).
"""

from __future__ import annotations

from typing import Any

from pymongo import AsyncMongoClient

from shared.settings import Settings

SERVER_SELECTION_MS = 2000
CONNECT_MS = 2000
# No single operation of ours takes long; a socket silent this long is a dead server.
SOCKET_MS = 10_000


def mongo_client(settings: Settings, *, appname: str) -> AsyncMongoClient[dict[str, Any]]:
    """A client of ``settings.mongo_url`` named ``appname`` in the server's logs."""
    return AsyncMongoClient(
        settings.mongo_url,
        tz_aware=True,
        serverSelectionTimeoutMS=SERVER_SELECTION_MS,
        connectTimeoutMS=CONNECT_MS,
        socketTimeoutMS=SOCKET_MS,
        appname=appname,
    )
