"""The routes that serve the conversation page, over HTTP (no browser needed)."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.browser.conftest import UPLOAD_MAX_FILES
from tests.e2e.conftest import SpindleStack

pytestmark = pytest.mark.e2e

IMPORT = re.compile(r'from "\./([\w.-]+)"')


@pytest.fixture
async def anonymous(browser_stack: SpindleStack) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=browser_stack.base_url, timeout=10.0)


async def test_the_page_needs_no_credentials_and_forbids_inline_script(
    anonymous: httpx.AsyncClient,
) -> None:
    async with anonymous:
        root = await anonymous.get("/")
        assert root.status_code == 307
        assert root.headers["location"] == "/ui/"
        page = await anonymous.get("/ui/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy
        assert "unsafe-inline" not in policy
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"


async def test_every_module_the_page_imports_is_served(anonymous: httpx.AsyncClient) -> None:
    async with anonymous:
        pending, served = ["app.js", "style.css"], set()
        while pending:
            name = pending.pop()
            if name in served:
                continue
            reply = await anonymous.get(f"/ui/assets/{name}")
            assert reply.status_code == 200, name
            if name.endswith(".js"):
                assert reply.headers["content-type"].startswith("text/javascript"), name
                pending.extend(IMPORT.findall(reply.text))
            served.add(name)
        assert {"api.js", "stream.js", "render.js", "markdown.js", "schema_form.js"} <= served


async def test_the_page_config_carries_the_upload_settings(anonymous: httpx.AsyncClient) -> None:
    async with anonymous:
        config = (await anonymous.get("/ui/config.json")).json()
    assert config["upload_accept"] == [".txt", ".md"]
    assert config["upload_max_files"] == UPLOAD_MAX_FILES
    assert config["max_upload_bytes"] == 1_048_576
    assert config["auth_disabled"] is False


@pytest.mark.parametrize("name", ["nope.js", "..%2Fapp.py", ".hidden", "..%5Cui.py"])
async def test_only_files_of_the_page_are_served(anonymous: httpx.AsyncClient, name: str) -> None:
    async with anonymous:
        reply = await anonymous.get(f"/ui/assets/{name}")
    assert reply.status_code == 404
    assert reply.headers["content-type"].startswith("application/problem+json")


async def test_the_page_is_not_part_of_the_api_document(anonymous: httpx.AsyncClient) -> None:
    async with anonymous:
        paths = (await anonymous.get("/openapi.json")).json()["paths"]
    assert not [path for path in paths if path == "/" or path.startswith("/ui")]
