"""deploy/temporal-setup.sh (run by docker-compose.yml's temporal-setup service)
against a real Temporal server with the real ``temporal`` CLI: it creates the
namespace and Spindle's search attributes, and running it again changes nothing."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from spindle.dev.embedded import SEARCH_ATTRIBUTES, TemporalDevServer, frontend_serving
from spindle.dev.processes import bin_path, free_port

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "temporal-setup.sh"


def test_namespace_setup_creates_the_search_attributes_and_is_idempotent(
    temporal_server: TemporalDevServer,
) -> None:
    namespace = f"setup-{uuid.uuid4().hex[:8]}"
    temporal = bin_path("temporal")
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_server.address,
        "TEMPORAL_NAMESPACE": namespace,
        "PATH": f"{Path(temporal).parent}{os.pathsep}{os.environ['PATH']}",
    }

    def setup() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", str(SCRIPT), "namespace"],
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
            check=False,
        )

    first = setup()
    assert first.returncode == 0, first.stderr
    again = setup()
    assert again.returncode == 0, again.stderr
    assert "Search attributes have been added" in first.stdout
    assert "added" not in again.stdout
    assert again.stdout.strip().endswith(f"namespace {namespace} ready")

    address = ["--address", temporal_server.address]
    listing = subprocess.run(
        [temporal, "operator", "search-attribute", "list", "-n", namespace, *address],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    rows = {tuple(line.split()) for line in listing.splitlines()}
    for attribute in SEARCH_ATTRIBUTES:
        assert tuple(attribute.split("=")) in rows


def test_the_dev_server_is_ready_when_its_frontend_answers_not_when_a_port_opens(
    temporal_server: TemporalDevServer, redis_url: str
) -> None:
    assert frontend_serving(temporal_server.host, temporal_server.port)
    assert not frontend_serving("127.0.0.1", free_port())  # nothing listens
    redis = urlsplit(redis_url)
    assert redis.hostname is not None and redis.port is not None
    assert not frontend_serving(redis.hostname, redis.port)  # open, but not Temporal
