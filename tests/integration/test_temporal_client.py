"""``connect_temporal``, the one way every Spindle process opens its Temporal
client: it reaches a real server with Spindle's namespace and data converter, and
gives up on an address where nothing listens with an error that says where."""

from __future__ import annotations

import logging

import pytest

from spindle.dev.processes import free_port
from spindle.shared.contracts.errors import Unavailable
from spindle.shared.platform.settings import Settings
from spindle.shared.temporal.client import connect_temporal
from spindle.shared.temporal.payload_offload import OffloadingPayloadCodec

pytestmark = pytest.mark.integration


async def test_it_connects_to_the_server_with_spindles_namespace_and_converter(
    settings: Settings,
) -> None:
    client = await connect_temporal(settings)
    assert await client.service_client.check_health()
    assert client.namespace == settings.temporal_namespace
    # Offloaded payloads can only be read back through Spindle's codec.
    assert isinstance(client.data_converter.payload_codec, OffloadingPayloadCodec)


async def test_nothing_listening_is_unavailable_after_the_configured_tries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    address = f"127.0.0.1:{free_port()}"
    settings = Settings(temporal_address=address, temporal_connect_attempts=2)
    with (
        caplog.at_level(logging.WARNING, logger="spindle.shared.temporal.client"),
        pytest.raises(Unavailable) as raised,
    ):
        await connect_temporal(settings)
    assert address in raised.value.detail
    assert "SPINDLE_TEMPORAL_ADDRESS" in raised.value.detail
    # One warning per failed try before the last, which raises.
    retries = [r.getMessage() for r in caplog.records if "not reachable" in r.getMessage()]
    assert len(retries) == 1
    assert "try 1 of 2" in retries[0]
