"""The interactive API docs (Swagger UI at ``/docs``, ReDoc at ``/redoc``), offline.

FastAPI's own doc pages load Swagger UI, ReDoc and a favicon from CDNs, so an
air-gapped user sees a blank page. These pages load the same assets from the
gateway itself: the files the ``fastapi-offline`` package ships (Swagger UI 5,
ReDoc 2, FastAPI's favicon; MIT licensed, versions pinned with the package in
pyproject.toml), served under ``/docs/assets/``. Swagger UI's online validator
badge is turned off (it would fetch an image from validator.swagger.io). The
pages hold no secret, so, like ``/openapi.json``, they need no credentials
(docs/api/index.md, "Interactive docs").

ReDoc's side menu always shows Redocly's logo from cdn.redoc.ly (it has no
option to hide it), so each page carries a Content-Security-Policy that lets it
load nothing from another origin: the browser never sends that request (the
image's error handler then hides it). Swagger UI starts from an inline script
and ReDoc styles itself inline, hence ``'unsafe-inline'``; both pages show only
the gateway's own OpenAPI document.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
ASSETS_URL = "/docs/assets"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
# The assets fastapi-offline ships: swagger-ui-bundle.js, swagger-ui.css,
# redoc.standalone.js, favicon.png.
ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))
# Swagger UI's defaults, less the online validator (an external request).
SWAGGER_UI_PARAMETERS = {"validatorUrl": None}
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "worker-src 'self' blob:",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)


def _same_origin_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    page.headers["X-Content-Type-Options"] = "nosniff"
    return page


router = APIRouter(include_in_schema=False)


def _root(request: Request) -> str:
    """The path prefix a proxy serves the gateway under (``root_path``), or ""."""
    return str(request.scope.get("root_path") or "")


@router.get(DOCS_URL)
async def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI over the gateway's OpenAPI document."""
    root = _root(request)
    app: FastAPI = request.app
    page = get_swagger_ui_html(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} - Swagger UI",
        oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT_URL}",
        swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
    )
    return _same_origin_only(page)


@router.get(OAUTH2_REDIRECT_URL)
async def swagger_ui_redirect() -> HTMLResponse:
    """Swagger UI's OAuth2 redirect page (self-contained)."""
    return get_swagger_ui_oauth2_redirect_html()


@router.get(REDOC_URL)
async def redoc(request: Request) -> HTMLResponse:
    """ReDoc over the gateway's OpenAPI document, without web fonts."""
    root = _root(request)
    app: FastAPI = request.app
    page = get_redoc_html(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} - ReDoc",
        redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )
    return _same_origin_only(page)


def install_api_docs(app: FastAPI) -> None:
    """Add ``/docs``, ``/redoc`` and their assets to an app built with
    ``docs_url=None, redoc_url=None``."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="api-docs-assets")
    app.include_router(router)
