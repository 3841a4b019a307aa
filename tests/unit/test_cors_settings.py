"""``cors_allow_origins`` (SPINDLE_CORS_ALLOW_ORIGINS): what it accepts, how it spells
it, and the errors that name it; the gateway adds CORS only when it lists origins."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from pydantic_settings import SettingsError
from starlette.middleware.cors import CORSMiddleware

from spindle.gateway.app import create_app
from spindle.shared.platform.settings import Settings

pytestmark = pytest.mark.unit


def test_the_default_is_no_origin() -> None:
    assert Settings().cors_allow_origins == []


def test_origins_are_spelt_as_a_browser_sends_them() -> None:
    settings = Settings(
        cors_allow_origins=[
            "https://App.Example.com",
            "HTTPS://app.example.com:443",  # the same origin again: listed once
            "http://localhost:5173",
            "http://shop.example.com:80",
            " https://[::1]:8443 ",
        ]
    )
    assert settings.cors_allow_origins == [
        "https://app.example.com",
        "http://localhost:5173",
        "http://shop.example.com",
        "https://[::1]:8443",
    ]


def test_the_environment_gives_a_json_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "SPINDLE_CORS_ALLOW_ORIGINS", '["https://app.example.com", "https://b.example.org:8443"]'
    )
    assert Settings().cors_allow_origins == [
        "https://app.example.com",
        "https://b.example.org:8443",
    ]


def test_a_bare_origin_in_the_environment_names_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPINDLE_CORS_ALLOW_ORIGINS", "https://app.example.com")
    with pytest.raises(SettingsError, match="cors_allow_origins"):
        Settings()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("*", r"'\*' is refused"),
        ("https://app.example.com/", "has a path"),
        ("https://app.example.com/embed", "has a path"),
        ("https://app.example.com?x=1", "has a path, query"),
        ("https://app.example.com#top", "has a path, query or fragment"),
        ("app.example.com", "is not an origin"),
        ("null", "is not an origin"),
        ("ftp://app.example.com", "is not an origin"),
        ("file:///srv/page.html", "is not an origin"),
        ("https://user@app.example.com", "has user info"),
        ("https://app.example.com:99999", "is not an origin"),
        ("https://app.example.com:http", "is not an origin"),
        ("https://bücher.example", "punycode"),
        ("https://app example.com", "bad host name"),
    ],
)
def test_what_is_not_an_origin_is_refused_naming_the_setting(value: str, why: str) -> None:
    with pytest.raises(ValidationError, match=why) as raised:
        Settings(cors_allow_origins=["https://fine.example.com", value])
    assert "cors_allow_origins" in str(raised.value)


@pytest.mark.parametrize(
    ("origins", "has_cors"), [([], False), (["https://app.example.com"], True)]
)
def test_the_gateway_adds_cors_only_for_listed_origins(
    origins: list[str], *, has_cors: bool
) -> None:
    app = create_app(Settings(auth_disabled=True, cors_allow_origins=origins))
    assert any(m.cls is CORSMiddleware for m in app.user_middleware) is has_cors
