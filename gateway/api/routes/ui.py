"""The conversation web page: plain ES modules and CSS from ``gateway/static``.

No build step: the browser loads ``/ui/`` (``index.html``), which imports its
modules from ``/ui/assets/``. The page holds no secret and reads no tenant data
by itself, so these routes need no credentials; every API call the page makes
carries the user's own API key (or none when auth is off), and its SSE stream
uses a stream token minted for the one run (docs/design.md §6). The routes are left out
of the OpenAPI document: they are not part of the API.

Every response carries a strict Content-Security-Policy (scripts and styles from
this origin only, no inline script, no plugins, no framing): a second line of
defence behind the page's own rule of never inserting model text as HTML.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response

from spindle.gateway.api.deps import SettingsDep
from spindle.shared.contracts.errors import NotFound

STATIC_DIR = Path(__file__).resolve().parents[2] / "static"
UI_PREFIX = "/ui"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # Stream URLs carry a token in their query string: never leak them onwards.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
ASSET_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
}

router = APIRouter(include_in_schema=False)


def _asset(name: str) -> Path:
    """The static file ``name``; only plain names of files that exist (no paths but
    ``vendor/<name>``)."""
    vendored = name.startswith("vendor/")  # one folder deep: the vendored libraries
    plain = name.removeprefix("vendor/") if vendored else name
    if not plain or "/" in plain or "\\" in plain or plain.startswith("."):
        raise NotFound(f"no page asset '{name}'")
    path = STATIC_DIR / name
    if not path.is_file():
        raise NotFound(f"no page asset '{name}'")
    return path


def _file(path: Path) -> FileResponse:
    media_type = ASSET_TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0]
    return FileResponse(path, media_type=media_type, headers=SECURITY_HEADERS)


@router.get("/")
async def root() -> RedirectResponse:
    """A browser opening the gateway lands on the conversation page."""
    return RedirectResponse(f"{UI_PREFIX}/", status_code=307)


@router.get(UI_PREFIX)
async def ui_no_slash() -> RedirectResponse:
    return RedirectResponse(f"{UI_PREFIX}/", status_code=307)


@router.get(f"{UI_PREFIX}/")
async def ui_page() -> FileResponse:
    return _file(_asset("index.html"))


@router.get(f"{UI_PREFIX}/runs")
async def runs_page() -> FileResponse:
    """Past and running runs: list, graph view and node inspector."""
    return _file(_asset("runs.html"))


@router.get(f"{UI_PREFIX}/inbox")
async def inbox_page() -> FileResponse:
    """The prompts the signed-in user may answer, across runs (docs/streaming/web-page.md)."""
    return _file(_asset("inbox.html"))


@router.get(f"{UI_PREFIX}/schedules")
async def schedules_page() -> FileResponse:
    """The tenant's schedules: list, create, pause, trigger, delete."""
    return _file(_asset("schedules.html"))


@router.get(f"{UI_PREFIX}/evaluations")
async def evaluations_page() -> FileResponse:
    """The tenant's evaluations and one evaluation's summary and runs
    (docs/replay-and-compare.md#evaluations)."""
    return _file(_asset("evaluations.html"))


@router.get(f"{UI_PREFIX}/compare")
async def compare_page() -> FileResponse:
    """Two related runs side by side: ``?a=<run>&b=<run>`` (docs/replay-and-compare.md)."""
    return _file(_asset("compare.html"))


@router.get(f"{UI_PREFIX}/spindle-conversation.js")
async def conversation_component() -> RedirectResponse:
    """The embeddable ``<spindle-conversation>`` (docs/streaming/embedding.md). A redirect
    to the asset, so the module's own imports resolve beside it in /ui/assets/."""
    return RedirectResponse(f"{UI_PREFIX}/assets/spindle-conversation.js", status_code=307)


@router.get(f"{UI_PREFIX}/embed-example.html")
async def embed_example_page() -> FileResponse:
    """An example page embedding ``<spindle-conversation>`` (docs/streaming/embedding.md)."""
    return _file(_asset("embed-example.html"))


@router.get(f"{UI_PREFIX}/config.json")
async def ui_config(settings: SettingsDep) -> Response:
    """What the page needs to know before its first API call."""
    body: dict[str, Any] = {
        "auth_disabled": settings.auth_disabled,
        "upload_accept": [
            item.strip() for item in settings.ui_upload_accept.split(",") if item.strip()
        ],
        "upload_max_files": settings.ui_upload_max_files,
        "max_upload_bytes": settings.max_upload_bytes,
        "stream_token_ttl_seconds": settings.stream_token_ttl_seconds,
    }
    return JSONResponse(body, headers=SECURITY_HEADERS)


@router.get(f"{UI_PREFIX}/assets/{{name}}")
async def ui_asset(name: str) -> FileResponse:
    return _file(_asset(name))


@router.get(f"{UI_PREFIX}/assets/vendor/{{name}}")
async def ui_vendor_asset(name: str) -> FileResponse:
    """A vendored front-end library, with its VERSION and LICENSE files beside it
    (gateway/static/vendor; docs/streaming/web-page.md, "Runs page")."""
    return _file(_asset(f"vendor/{name}"))
