"""The one way Spindle opens a Redis client: a single server, a Redis Cluster
or a master watched by Redis Sentinel, chosen by the URL's scheme.

=====================================================  ===========================
``redis://[[user]:pass@]host:port/db``                 one server (``rediss://``: TLS)
``redis+cluster://[[user]:pass@]host:port,host:port``  a Redis Cluster; any reachable
                                                        node(s) to discover it from
``redis+sentinel://[[user]:pass@]host:port,host:port/  the master ``<service>`` that
<service>[/db]``                                        these sentinels elect
=====================================================  ===========================

``rediss+cluster://`` and ``rediss+sentinel://`` use TLS to the data nodes. A
sentinel that needs its own password takes ``?sentinel_password=...``. The user
and password of the URL are those of the data nodes.

Every key Spindle writes carries a hash tag (``{<run id>}``, ``{<tenant>}``,
``{push}``, ``{archive-outbox:<db>}``), and every Lua script, MULTI and
pipeline touches the keys of a single tag, so they all run on a cluster. Live
messages use sharded pub/sub there (``SPUBLISH``/``SSUBSCRIBE``, Redis 7): a
channel lives on the node that owns its slot, so publishing costs one node,
not the whole cluster bus.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

RedisClient = aioredis.Redis | RedisCluster
"""A client of any topology: both kinds share the command API Spindle uses."""

Topology = Literal["standalone", "cluster", "sentinel"]

POOL_SIZE = 64
# Pool connections are for commands; nothing of ours blocks on Redis for long.
SOCKET_TIMEOUT = 10.0
CONNECT_TIMEOUT = 3.0
POOL_WAIT_SECONDS = 10.0
CLUSTER_SPARE_CONNECTIONS = 8

_SCHEMES: dict[str, tuple[Topology, bool]] = {
    "redis": ("standalone", False),
    "rediss": ("standalone", True),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
}


@dataclass(frozen=True)
class RedisTarget:
    """Where a Redis URL points.

    Attributes:
        topology: standalone, cluster or sentinel.
        nodes: (host, port) of the server, the cluster's seed nodes or the sentinels.
        service: the sentinel master name (sentinel only).
        db: the database number (always 0 on a cluster).
        tls: TLS to the data nodes.
    """

    topology: Topology
    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    db: int = 0
    tls: bool = False
    service: str | None = None
    sentinel_password: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def parse_redis_url(url: str) -> RedisTarget:
    """Read a Redis URL of any of the three topologies.

    Raises:
        ValueError: an unknown scheme, a missing sentinel service name, a
            database other than 0 on a cluster, or a malformed host:port.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "unix":  # a local socket: redis-py reads the rest
        return RedisTarget(topology="standalone", nodes=())
    if scheme not in _SCHEMES:
        known = ", ".join(f"{s}://" for s in [*_SCHEMES, "unix"])
        raise ValueError(f"Redis URL {url!r}: unknown scheme {scheme!r} (use one of {known})")
    topology, tls = _SCHEMES[scheme]
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, password = _credentials(userinfo)
    default_port = 26379 if topology == "sentinel" else 6379
    nodes = tuple(_host_port(item, default_port, url) for item in hosts.split(",") if item)
    if not nodes:
        raise ValueError(f"Redis URL {url!r}: no host")
    path = [unquote(p) for p in parts.path.split("/") if p]
    options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    service = None
    if topology == "sentinel":
        if not path:
            raise ValueError(
                f"Redis URL {url!r}: name the master, redis+sentinel://host:port/<service>/<db>"
            )
        service, path = path[0], path[1:]
    db = _db(path, options, url)
    if topology == "cluster" and db != 0:
        raise ValueError(f"Redis URL {url!r}: a Redis Cluster has database 0 only")
    if topology == "standalone" and len(nodes) > 1:
        raise ValueError(
            f"Redis URL {url!r}: several hosts need redis+cluster:// or redis+sentinel://"
        )
    return RedisTarget(
        topology=topology,
        nodes=nodes,
        username=username,
        password=password,
        db=db,
        tls=tls,
        service=service,
        sentinel_password=options.pop("sentinel_password", None),
        options=options,
    )


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    if not userinfo:
        return None, None
    user, colon, password = userinfo.partition(":")
    return (unquote(user) or None), (unquote(password) if colon else None)


def _host_port(item: str, default_port: int, url: str) -> tuple[str, int]:
    if item.startswith("["):  # [ipv6]:port
        host, _, rest = item[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = item.partition(":")
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise ValueError(f"Redis URL {url!r}: bad port in {item!r}") from None
    if not host or not 0 < port < 65536:
        raise ValueError(f"Redis URL {url!r}: bad host:port {item!r}")
    return host, port


def _db(path: list[str], options: dict[str, str], url: str) -> int:
    text = path[0] if path else options.pop("db", "0")
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"Redis URL {url!r}: database {text!r} is not a number") from None


def _common_kwargs(target: RedisTarget) -> dict[str, Any]:
    return {
        "username": target.username,
        "password": target.password,
        "decode_responses": False,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "socket_keepalive": True,
        "health_check_interval": 30,
    }


def _retry() -> Retry:
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=3)


class _BoundedCluster(RedisCluster):
    """A cluster client whose callers wait for a free connection.

    redis-py's cluster nodes raise ``MaxConnectionsError`` once their pool is
    used up; a burst of posts must queue instead, like on the standalone
    blocking pool. At most ``pool_size`` commands or pipelines are in flight,
    so no node ever needs more connections than that (plus a few for the
    client's own slot-map refreshes).
    """

    def __init__(self, *, pool_size: int, **kwargs: Any) -> None:
        super().__init__(max_connections=pool_size + CLUSTER_SPARE_CONNECTIONS, **kwargs)
        self.in_flight = asyncio.Semaphore(pool_size)
        self._discovering = asyncio.Lock()
        self._discovered = False

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        await self.discover()
        async with self.in_flight:
            return await super().execute_command(*args, **kwargs)

    async def discover(self) -> None:
        """Read the slot map once before the first command.

        Measured with redis-py 8.1: when a burst of first commands races the
        lazy discovery, connections of commands already sent are closed under
        them and the commands are retried, so a script could run twice.
        """
        if self._discovered:
            return
        async with self._discovering:
            if not self._discovered:
                await self.initialize()
                self._discovered = True

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> ClusterPipeline:
        if shard_hint:
            return super().pipeline(transaction, shard_hint)  # refused by redis-py
        return _BoundedClusterPipeline(self, transaction)  # type: ignore[abstract]


class _BoundedClusterPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        client = self.cluster_client
        assert isinstance(client, _BoundedCluster)
        await client.discover()
        async with client.in_flight:
            return await super().execute(raise_on_error, allow_redirections)


class _SentinelMaster(aioredis.Redis):
    """The master's client; closing it also closes its connections to the sentinels."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        pool = self.connection_pool
        if isinstance(pool, SentinelConnectionPool):
            await pool.sentinel_manager.aclose()


class _BlockingSentinelPool(SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """The sentinel-managed pool, waiting for a free connection instead of failing
    with "Too many connections" (like the standalone pool)."""


def connect_redis(url: str, *, pool_size: int = POOL_SIZE) -> RedisClient:
    """A client of ``url`` (no I/O until the first command).

    Bursts (a worker's concurrent activities all posting) wait for a free
    connection rather than fail, and connection errors are retried with a
    short backoff; on a cluster, MOVED/ASK and failovers are followed by
    redis-py, and on Sentinel a failover is picked up at the next connection.

    Raises:
        ValueError: the URL is malformed (see ``parse_redis_url``).
    """
    target = parse_redis_url(url)
    common = _common_kwargs(target)
    if target.topology == "cluster":
        return _BoundedCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
            pool_size=pool_size,
            retry=_retry(),
            retry_on_error=[RedisConnectionError, RedisTimeoutError],
            ssl=target.tls,
            **common,
        )
    if target.topology == "sentinel":
        assert target.service is not None
        sentinel = Sentinel(  # type: ignore[no-untyped-call]
            list(target.nodes),
            sentinel_kwargs={
                "password": target.sentinel_password,
                "socket_connect_timeout": CONNECT_TIMEOUT,
                "socket_timeout": CONNECT_TIMEOUT,
            },
        )
        client: aioredis.Redis = sentinel.master_for(
            target.service,
            redis_class=_SentinelMaster,
            connection_pool_class=_BlockingSentinelPool,
            db=target.db,
            max_connections=pool_size,
            timeout=POOL_WAIT_SECONDS,
            retry=_retry(),
            retry_on_error=[RedisConnectionError, RedisTimeoutError],
            ssl=target.tls,
            **common,
        )
        return client
    if not target.nodes:  # unix socket: no TCP keep-alive
        common.pop("socket_keepalive")
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=pool_size,
        timeout=POOL_WAIT_SECONDS,
        retry=_retry(),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
        **common,
    )
    return aioredis.Redis.from_pool(pool)


def is_cluster(client: RedisClient) -> bool:
    """True for a Redis Cluster client (sharded pub/sub, per-node connections)."""
    return isinstance(client, RedisCluster)


def publish_command(client: RedisClient) -> str:
    """The publish command a Lua script of ``client`` uses: ``SPUBLISH`` on a
    cluster (the channel stays on its slot's shard), ``PUBLISH`` elsewhere
    (also Redis before 7)."""
    return "SPUBLISH" if is_cluster(client) else "PUBLISH"


__all__ = [
    "RedisClient",
    "RedisTarget",
    "Topology",
    "connect_redis",
    "is_cluster",
    "parse_redis_url",
    "publish_command",
]
