"""The one way Spindle opens a MongoDB client.

Every store (archive, task store, API keys, files, offloaded payloads)
connects alike: aware UTC datetimes, short timeouts so a MongoDB that is down
or stops answering costs a request a few seconds, never a hang (runs go on and
the archive outbox catches up later), and the write and read concerns of the
settings, ``majority`` by default.

On a replica set (``mongodb://a,b,c/?replicaSet=rs0``) a ``majority`` write is
acknowledged once most members have it, so a failover never rolls back an
archived message or a task status a client was already told about; retryable
writes (pymongo's default, ``retryWrites=true``) resend a write interrupted by
the election. A write whose majority takes longer than ``WRITE_CONCERN_MS``
fails with a timeout, which the archive outbox treats as "MongoDB unavailable"
and replays (every archive write is idempotent). A standalone server
acknowledges ``w: "majority"`` as soon as it has the write, like ``w: 1``.
"""

from __future__ import annotations

from typing import Any

from pymongo import AsyncMongoClient

from spindle.shared.platform.settings import Settings

SERVER_SELECTION_MS = 2000
CONNECT_MS = 2000
# No single operation of ours takes long; a socket silent this long is a dead server.
SOCKET_MS = 10_000
# Waiting for a majority longer than this means the replica set is unwell.
WRITE_CONCERN_MS = 5000


def write_concern_w(settings: Settings) -> int | str:
    """The ``w`` of ``settings.mongo_write_concern``: a member count or a name."""
    value = settings.mongo_write_concern
    return int(value) if value.isdigit() else value


def mongo_client(
    settings: Settings, *, appname: str, **options: Any
) -> AsyncMongoClient[dict[str, Any]]:
    """A client of ``settings.mongo_url`` named ``appname`` in the server's logs.

    Args:
        options: further ``AsyncMongoClient`` options (e.g. ``event_listeners``).
    """
    return AsyncMongoClient(
        settings.mongo_url,
        tz_aware=True,
        serverSelectionTimeoutMS=SERVER_SELECTION_MS,
        connectTimeoutMS=CONNECT_MS,
        socketTimeoutMS=SOCKET_MS,
        appname=appname,
        w=write_concern_w(settings),
        wTimeoutMS=WRITE_CONCERN_MS,
        readConcernLevel=settings.mongo_read_concern,
        **options,
    )
