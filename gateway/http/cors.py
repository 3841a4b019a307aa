"""CORS for the origins in ``cors_allow_origins``: web pages of other sites may call the gateway.

Off by default (an empty list adds no middleware and no header). With origins
listed, Starlette's ``CORSMiddleware`` answers preflights and adds
``Access-Control-Allow-Origin`` to responses to those origins only; ``*`` is refused
by the setting (``spindle.shared.platform.settings_sections.gateway.cors_origin``).

Credentials stay off (no ``Access-Control-Allow-Credentials``): callers prove who
they are with an API key or token in a header (``Authorization``, ``X-API-Key``) or,
for ``EventSource``, a stream token in the URL, never with cookies, so a page that
holds no key gets nothing from the browser's ambient state.

The middleware only adds headers to ``http.response.start``; an SSE stream's
body chunks go on unbuffered (they even skip it: ``spindle.gateway.http.server_send``).
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from spindle.shared.platform.settings import Settings

CORS_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE")
"""Every method a gateway route answers (OPTIONS is the preflight itself)."""

CORS_REQUEST_HEADERS = (
    "Accept",
    "Authorization",
    "X-API-Key",
    "Content-Type",
    "Cache-Control",
    # EventSource's reconnects and the SDK's resumes; A2A's and AG-UI's streams.
    "Last-Event-ID",
    "A2A-Last-Event-ID",
    "Idempotency-Key",
    "If-None-Match",
    "A2A-Version",
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    # A page that traces its calls joins the gateway's trace (W3C Trace Context).
    "traceparent",
    "tracestate",
)
"""Request headers a cross-origin page may send: those the component, the pages and the
SDK send, and those the protocol endpoints read."""

CORS_EXPOSED_HEADERS = (
    "Location",
    "Retry-After",
    "Idempotent-Replayed",
    "ETag",
    "Content-Disposition",
    "Content-Encoding",
    "Mcp-Session-Id",
    "WWW-Authenticate",
)
"""Response headers a cross-origin page's script may read, besides the ones the browser
always shows (Content-Type, Content-Length, Cache-Control, ...)."""

CORS_MAX_AGE_SECONDS = 600
"""How long a browser may reuse a preflight's answer."""


def install_cors(app: FastAPI, settings: Settings) -> None:
    """Add ``CORSMiddleware`` for ``settings.cors_allow_origins``; nothing when it is empty.

    Call it after every other ``add_middleware``: added last, it runs first, so a
    preflight is answered before any limit or route sees it, and the other
    middleware's own answers (a 413 of the body limit) carry the CORS headers too.
    """
    if not settings.cors_allow_origins:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=settings.cors_allow_origins,
        allow_methods=CORS_METHODS,
        allow_headers=CORS_REQUEST_HEADERS,
        allow_credentials=False,
        expose_headers=CORS_EXPOSED_HEADERS,
        max_age=CORS_MAX_AGE_SECONDS,
    )


__all__ = [
    "CORS_EXPOSED_HEADERS",
    "CORS_MAX_AGE_SECONDS",
    "CORS_METHODS",
    "CORS_REQUEST_HEADERS",
    "install_cors",
]
