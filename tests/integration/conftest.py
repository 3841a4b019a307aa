"""Fixtures for integration tests of the bus, the subscription hub and the archive.

They reuse the session's real Redis and nx-27017 servers (``tests/conftest.py``)
and give each test its own stream ids so tests never see each other's data.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from tests.polling import eventually

__all__ = ["eventually"]
import redis.asyncio as aioredis
from pymongo import AsyncMongoClient

from shared.archive import RunArchive
from shared.bus import MessageBus
from shared.bus_hub import SubscriptionHub


@pytest.fixture
def stream_id() -> str:
    """A stream id no other test uses."""
    return f"it-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def redis_factory(redis_url: str) -> Callable[[], aioredis.Redis]:
    def make() -> aioredis.Redis:
        return aioredis.Redis.from_url(redis_url, decode_responses=False)

    return make


@pytest.fixture(scope="session")
async def redis_client(
    redis_factory: Callable[[], aioredis.Redis],
) -> AsyncIterator[aioredis.Redis]:
    """A plain client for looking at what the bus wrote."""
    client = redis_factory()
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
async def bus(redis_factory: Callable[[], aioredis.Redis]) -> AsyncIterator[MessageBus]:
    message_bus = MessageBus(redis_factory())
    yield message_bus
    await message_bus.close()


@pytest.fixture(scope="session")
async def hub(redis_factory: Callable[[], aioredis.Redis]) -> AsyncIterator[SubscriptionHub]:
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
