"""Redis URLs of the three topologies, the clients made from them, and URLs
with several hosts redacted for logs."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import SentinelConnectionPool

from spindle.shared.platform.logging_setup import redact_url
from spindle.shared.platform.redis_connect import connect_redis, parse_redis_url, publish_command

pytestmark = pytest.mark.unit


def test_a_single_server_url() -> None:
    target = parse_redis_url("redis://:s3cret@cache.internal:6380/2")
    assert (target.topology, target.nodes, target.db, target.password, target.tls) == (
        "standalone",
        (("cache.internal", 6380),),
        2,
        "s3cret",
        False,
    )
    assert parse_redis_url("rediss://cache").tls
    assert parse_redis_url("rediss://cache").nodes == (("cache", 6379),)


def test_a_cluster_url_lists_seed_nodes() -> None:
    target = parse_redis_url("redis+cluster://app:pw@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002")
    assert target.topology == "cluster"
    assert target.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 7002))
    assert (target.username, target.password, target.db) == ("app", "pw", 0)
    assert parse_redis_url("rediss+cluster://n1:7000/0").tls


def test_a_sentinel_url_names_the_master_and_db() -> None:
    target = parse_redis_url("redis+sentinel://:pw@s1:26379,s2/mymaster/3?sentinel_password=sp")
    assert target.topology == "sentinel"
    assert target.nodes == (("s1", 26379), ("s2", 26379))  # the sentinel port by default
    assert (target.service, target.db, target.password, target.sentinel_password) == (
        "mymaster",
        3,
        "pw",
        "sp",
    )
    assert parse_redis_url("redis+sentinel://s1/mymaster").db == 0


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("http://cache:6379", "unknown scheme"),
        ("redis+sentinel://s1:26379", "name the master"),
        ("redis+cluster://n1:7000/3", "database 0 only"),
        ("redis://a:1,b:2/0", "several hosts"),
        ("redis://cache:port/0", "bad port"),
        ("redis://cache:6379/zero", "not a number"),
        ("redis+cluster://", "no host"),
    ],
)
def test_malformed_urls_say_what_is_wrong(url: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        parse_redis_url(url)


async def test_a_unix_socket_url_makes_a_unix_connection() -> None:
    client = connect_redis("unix:///run/redis/redis.sock?db=2")
    try:
        pool = client.connection_pool
        connection = pool.connection_class(**pool.connection_kwargs)
        assert (connection.path, connection.db) == ("/run/redis/redis.sock", 2)  # type: ignore[attr-defined]
    finally:
        await client.aclose()


async def test_each_scheme_makes_its_kind_of_client() -> None:
    single = connect_redis("redis://127.0.0.1:1/4")
    cluster = connect_redis("redis+cluster://127.0.0.1:1,127.0.0.1:2")
    sentinel = connect_redis("redis+sentinel://127.0.0.1:1/mymaster/5")
    try:
        assert isinstance(single, aioredis.Redis)
        assert single.connection_pool.connection_kwargs["db"] == 4
        assert isinstance(cluster, RedisCluster)
        assert isinstance(sentinel, aioredis.Redis)
        assert isinstance(sentinel.connection_pool, SentinelConnectionPool)
        assert sentinel.connection_pool.service_name == "mymaster"
        assert sentinel.connection_pool.connection_kwargs["db"] == 5
        assert [publish_command(c) for c in (single, cluster, sentinel)] == [
            "PUBLISH",
            "SPUBLISH",
            "PUBLISH",
        ]
    finally:
        for client in (single, cluster, sentinel):
            await client.aclose()


@pytest.mark.parametrize(
    ("url", "logged"),
    [
        ("redis+cluster://u:pw@h1:1,h2:2", "redis+cluster://u:***@h1:1,h2:2"),
        ("redis+sentinel://:pw@s1,s2/mymaster/0", "redis+sentinel://***@s1,s2/mymaster/0"),
        ("mongodb://a:pw@x:1,y:2/?replicaSet=rs0", "mongodb://a:***@x:1,y:2/?replicaSet=rs0"),
        ("redis://h:6379/0", "redis://h:6379/0"),
    ],
)
def test_urls_with_several_hosts_are_redacted_for_logs(url: str, logged: str) -> None:
    assert redact_url(url) == logged
