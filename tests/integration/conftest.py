"""Fixtures for integration tests of the bus, the subscription hub and the archive.

They reuse the session's real Redis and nx-27017 servers (``tests/conftest.py``)
and give each test its own stream ids so tests never see each other's data.

Redis topologies: a module marked ``pytest.mark.redis_topologies`` runs each of
its tests that use ``redis_topology`` (directly or through ``redis_factory``,
``redis_client``, ``bus`` or ``hub``) once against the session's single server
and once against a real three-master Redis Cluster (started once per session,
only when such a test runs: ``redis_cluster`` of ``tests/conftest.py``). Other
modules see the single server only.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from pymongo import AsyncMongoClient

from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.redis_connect import RedisClient
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from tests.integration.redis_topologies import TOPOLOGIES, RedisTopology
from tests.polling import eventually

__all__ = ["eventually"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "redis_topologies: run the module's Redis tests on a server and a cluster"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "redis_topology" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "redis_topologies"
    ):
        metafunc.parametrize("redis_topology", TOPOLOGIES, indirect=True, scope="session")


@pytest.fixture
def stream_id() -> str:
    """A stream id no other test uses."""
    return f"it-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def redis_topology(request: pytest.FixtureRequest, redis_url: str) -> RedisTopology:
    """The Redis the bus tests talk to: the session's server, or the cluster."""
    if getattr(request, "param", "standalone") == "cluster":
        cluster: RedisTopology = request.getfixturevalue("redis_cluster")
        return cluster
    port = int(redis_url.rsplit(":", 1)[1].split("/", 1)[0])
    return RedisTopology("standalone", redis_url, [port])


@pytest.fixture(scope="session")
def redis_factory(redis_topology: RedisTopology) -> Callable[[], RedisClient]:
    """Clients of the topology, made by Spindle's own factory."""
    return redis_topology.client


@pytest.fixture(scope="session")
async def redis_client(
    redis_factory: Callable[[], RedisClient],
) -> AsyncIterator[RedisClient]:
    """A plain client for looking at what the bus wrote."""
    client = redis_factory()
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
def activity_settings(redis_url: str, mongo_url: str) -> Settings:
    """The settings activities run with outside a worker (given to their class, as
    ``build_worker`` gives the worker's): the session's Redis and Mongo."""
    return Settings(redis_url=redis_url, mongo_url=mongo_url, llm_provider="offline")


@pytest.fixture(scope="session")
async def bus(redis_factory: Callable[[], RedisClient]) -> AsyncIterator[MessageBus]:
    message_bus = MessageBus(redis_factory())
    yield message_bus
    await message_bus.close()


@pytest.fixture(scope="session")
async def hub(redis_factory: Callable[[], RedisClient]) -> AsyncIterator[SubscriptionHub]:
    client = redis_factory()
    subscription_hub = SubscriptionHub(client)
    await subscription_hub.start()
    yield subscription_hub
    await subscription_hub.stop()
    await client.aclose()


@pytest.fixture(scope="session")
async def archive(mongo_url: str) -> AsyncIterator[RunArchive]:
    """An archive in a database of its own for this session."""
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(
        mongo_url, tz_aware=True, serverSelectionTimeoutMS=5000
    )
    run_archive = RunArchive(client, f"spindle_it_{uuid.uuid4().hex[:8]}")
    await run_archive.ensure_indexes()
    yield run_archive
    await client.drop_database(run_archive.database.name)
    await run_archive.close()
