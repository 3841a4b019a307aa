"""How a Spindle process reaches Temporal: plain gRPC, TLS on the system's roots,
or TLS with the PEM files the settings name (``connect_temporal``'s ``tls``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from spindle.shared.contracts.errors import Unavailable
from spindle.shared.platform.settings import Settings
from spindle.shared.temporal.client import tls_config

pytestmark = pytest.mark.unit

CA_PEM = b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"
CERT_PEM = b"-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n"
KEY_PEM = b"-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n"


def pem(tmp_path: Path, name: str, body: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(body)
    return str(path)


def test_by_default_temporal_is_reached_over_plain_grpc() -> None:
    assert tls_config(Settings()) is False


def test_tls_on_without_files_uses_the_system_roots() -> None:
    assert tls_config(Settings(temporal_tls=True)) is True


def test_an_api_key_turns_tls_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # Temporal Cloud's plain variable name is read too.
    monkeypatch.setenv("TEMPORAL_API_KEY", "cloud-key")
    settings = Settings()
    assert settings.temporal_api_key == "cloud-key"
    assert tls_config(settings) is True


def test_the_named_files_are_read_into_the_tls_config(tmp_path: Path) -> None:
    settings = Settings(
        temporal_tls_ca_file=pem(tmp_path, "ca.pem", CA_PEM),
        temporal_tls_cert_file=pem(tmp_path, "client.pem", CERT_PEM),
        temporal_tls_key_file=pem(tmp_path, "client.key", KEY_PEM),
    )
    tls = tls_config(settings)
    assert isinstance(tls, TLSConfig)
    assert tls.server_root_ca_cert == CA_PEM
    assert tls.client_cert == CERT_PEM
    assert tls.client_private_key == KEY_PEM


def test_a_ca_file_alone_turns_tls_on_without_a_client_certificate(tmp_path: Path) -> None:
    tls = tls_config(Settings(temporal_tls_ca_file=pem(tmp_path, "ca.pem", CA_PEM)))
    assert isinstance(tls, TLSConfig)
    assert tls.server_root_ca_cert == CA_PEM
    assert tls.client_cert is None
    assert tls.client_private_key is None


def test_an_unreadable_file_is_unavailable_naming_the_path_and_variable(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "ca.pem"
    with pytest.raises(Unavailable) as raised:
        tls_config(Settings(temporal_tls_ca_file=str(missing)))
    assert str(missing) in raised.value.detail
    assert "SPINDLE_TEMPORAL_TLS_CA_FILE" in raised.value.detail


def test_a_client_certificate_without_its_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Unavailable) as raised:
        tls_config(Settings(temporal_tls_cert_file=pem(tmp_path, "client.pem", CERT_PEM)))
    assert "SPINDLE_TEMPORAL_TLS_KEY_FILE" in raised.value.detail
