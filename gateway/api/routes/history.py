"""Phase 1 of seed 002's two-phase streaming: a run's stored messages, gzip JSON.

The body is built by joining the stored bytes (they already are the wire
format; re-validating them through pydantic would cost ~10x, docs/design.md §9), and
compressed at ``settings.history_gzip_level`` (1 by default: 2x faster than 6
for a 4.7 vs 6.2 ratio on a 1000-message history). Large gzip bodies are kept
per process (``GzipCache``), named by the seqs they hold, so the same history
is compressed once however many times it is read.
"""

from __future__ import annotations

import asyncio
import gzip
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import Response

from spindle.gateway.api.deps import ArchiveDep, BusDep, ReadableRunDep, SettingsDep
from spindle.gateway.models import MessagesPage
from spindle.gateway.streams.history import GzipCache, compact_superseded, stored_messages

router = APIRouter(tags=["messages"])

# Compress bigger bodies off the event loop, and keep them: a run's history
# is read again (reloads, every viewer of a shared run) and does not change for
# the same seqs.
GZIP_THREAD_BYTES = 64 * 1024
GZIP_CACHE = GzipCache()


def accepts_gzip(accept_encoding: str | None) -> bool:
    """True when ``Accept-Encoding`` allows gzip (``gzip`` or ``*``, q > 0)."""
    if not accept_encoding:
        return False
    allowed: dict[str, bool] = {}
    for part in accept_encoding.split(","):
        coding, _, params = part.strip().partition(";")
        coding = coding.strip().lower()
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        allowed[coding] = q > 0
    if "gzip" in allowed:
        return allowed["gzip"]
    return allowed.get("*", False)


@router.get(
    "/runs/{workflow_id}/{run_id}/updates",
    response_model=MessagesPage,
    summary="The run's stored messages (compact JSON), gzip when accepted",
    responses={
        401: {"description": "missing or invalid credentials (problem+json)"},
        404: {"description": "unknown run (problem+json)"},
    },
)
async def get_updates(
    workflow_id: str,
    run_id: str,
    *,
    run: ReadableRunDep,
    bus: BusDep,
    archive: ArchiveDep,
    settings: SettingsDep,
    since: Annotated[
        int | None, Query(ge=0, description="only messages with ts > since (epoch ms)")
    ] = None,
    compact: Annotated[
        bool,
        Query(
            description=(
                "drop STREAMING_CHUNK messages superseded by the final THOUGHT/ANSWER "
                "(or voided by RESTARTING) of the same activity; false: every stored message"
            )
        ),
    ] = True,
    accept_encoding: Annotated[str | None, Header()] = None,
) -> Response:
    messages = await stored_messages(
        workflow_id,
        bus=bus,
        archive=archive if settings.archive_enabled else None,
        since_ts=since,
    )
    headers = {"Vary": "Accept-Encoding", "Cache-Control": "no-store"}
    gzipped = accepts_gzip(accept_encoding)
    key = GzipCache.key(workflow_id, messages, since, compact, settings.history_gzip_level)
    if gzipped and (cached := GZIP_CACHE.get(key)) is not None:
        headers["Content-Encoding"] = "gzip"
        return Response(cached, media_type="application/json", headers=headers)
    if compact:
        messages = compact_superseded(messages)
    body = b'{"messages":[' + b",".join(m.raw for m in messages) + b"]}"
    if gzipped:
        level = settings.history_gzip_level
        if len(body) >= GZIP_THREAD_BYTES:
            body = await asyncio.to_thread(gzip.compress, body, level, mtime=0)
            GZIP_CACHE.put(key, body)
        else:
            body = gzip.compress(body, level, mtime=0)
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type="application/json", headers=headers)
