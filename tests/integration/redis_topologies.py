"""Real Redis topologies for the bus tests: a three-master Redis Cluster and a
Sentinel-watched master with one replica, built from Debian's ``redis-server``
on loopback ports.

The cluster is assembled from Python (``CLUSTER ADDSLOTSRANGE`` + ``CLUSTER
MEET``, no ``redis-cli``) and is ready when every node reports
``cluster_state:ok`` and agrees on the slot map (polled, never slept on).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.crc import key_slot

from spindle.dev.embedded import redis_server
from spindle.dev.processes import ManagedProcess, free_port, port_open, wait_until
from spindle.shared.platform.redis_connect import RedisClient, connect_redis

HOST = "127.0.0.1"
SLOTS = 16384
TOPOLOGIES = ("standalone", "cluster")


def have_redis_server() -> bool:
    return shutil.which("redis-server") is not None


def redis_server_version() -> tuple[int, ...]:
    """The version of ``redis-server`` on PATH, e.g. (7, 0, 15)."""
    out = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True, check=True
    ).stdout
    version = out.split("v=", 1)[1].split()[0]
    return tuple(int(part) for part in version.split("."))


def redis_node(
    data_dir: Path, port: int, *extra: str, name: str = "redis-server"
) -> ManagedProcess:
    """A ``redis-server`` on loopback that keeps nothing on disk."""
    return redis_server(data_dir, host=HOST, port=port, extra_args=extra, name=f"{name} :{port}")


@dataclass
class RedisTopology:
    """A running Redis of one topology, as the bus tests see it.

    Attributes:
        name: ``standalone`` or ``cluster``.
        url: what ``SPINDLE_REDIS_URL`` would say.
        nodes: ports of the data nodes (the primaries of a cluster).
        slot_owner: on a cluster, the port of the primary of each slot range.
    """

    name: str
    url: str
    nodes: list[int]
    slot_owner: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def sharded(self) -> bool:
        return self.name == "cluster"

    def client(self) -> RedisClient:
        """A client through Spindle's own factory."""
        return connect_redis(self.url, pool_size=16)

    def port_of(self, key: str) -> int:
        """The port of the node that serves ``key`` (or a channel)."""
        if not self.slot_owner:
            return self.nodes[0]
        slot = key_slot(key.encode())
        return next(port for start, end, port in self.slot_owner if start <= slot <= end)

    def node(self, key: str) -> aioredis.Redis:
        """A plain client of the node that serves ``key`` (close it after use)."""
        if not self.sharded:
            return aioredis.Redis.from_url(self.url)
        return aioredis.Redis(host=HOST, port=self.port_of(key))

    async def numsub(self, channel: str) -> int:
        """Subscribers of a live channel (shard channel on a cluster)."""
        async with self.node(channel) as node:
            if self.sharded:
                counts: Any = await node.pubsub_shardnumsub(channel)
            else:
                counts = await node.pubsub_numsub(channel)
            return int(counts[0][1])

    @contextlib.asynccontextmanager
    async def listen(self, channel: str) -> AsyncIterator[PubSub]:
        """A raw subscriber of ``channel`` on its node (SSUBSCRIBE on a cluster),
        confirmed by Redis before it is handed out."""
        async with self.node(channel) as node:
            pubsub = node.pubsub()
            try:
                if self.sharded:
                    await pubsub.ssubscribe(channel)
                else:
                    await pubsub.subscribe(channel)
                confirmed = await pubsub.get_message(timeout=5)
                assert confirmed is not None
                assert confirmed["type"] in ("subscribe", "ssubscribe")
                yield pubsub
            finally:
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def clients_named(self, key: str, name: str) -> list[dict[str, str]]:
        """``CLIENT LIST`` entries named ``name`` on the node serving ``key``."""
        async with self.node(key) as node:
            return [c for c in await node.client_list() if c.get("name") == name]

    async def kill_client(self, key: str, client_id: str) -> None:
        async with self.node(key) as node:
            await node.client_kill_filter(_id=client_id)

    def subscription_count_field(self) -> str:
        """The ``CLIENT LIST`` field counting a connection's live channels."""
        return "ssub" if self.sharded else "sub"


@pytest.fixture(scope="session")
def redis_cluster(servers_dir: Path) -> Iterator[RedisTopology]:
    """A three-master Redis Cluster on loopback ports, once per session (sharded
    pub/sub needs Redis 7). ``tests/conftest.py`` offers it to every test."""
    if not have_redis_server():
        pytest.skip("no redis-server on PATH for the Redis Cluster")
    if redis_server_version() < (7, 0):
        pytest.skip("sharded pub/sub and CLUSTER ADDSLOTSRANGE need redis-server 7.0+")
    ports = [free_port() for _ in range(3)]
    processes, topology = start_cluster(servers_dir / "redis-cluster", ports)
    yield topology
    for process in processes:
        process.stop()


def start_cluster(data_dir: Path, ports: list[int]) -> tuple[list[ManagedProcess], RedisTopology]:
    """Start ``len(ports)`` cluster-enabled masters, give each an equal slot range,
    join them and wait until every node agrees the cluster is ok.

    Raises:
        spindle.dev.processes.ProcessFailed: a node did not start or the cluster did
            not form in time (the processes are stopped).
    """
    bus_ports = [free_port() for _ in ports]
    processes = [
        redis_node(
            data_dir / str(port),
            port,
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(data_dir / str(port) / "nodes.conf"),
            "--cluster-node-timeout",
            "5000",
            # The bus port defaults to port + 10000, past 65535 for high free ports.
            "--cluster-port",
            str(bus_port),
            name="redis cluster node",
        )
        for port, bus_port in zip(ports, bus_ports, strict=True)
    ]
    for process in processes:
        process.start(wait=False)
    try:
        for process in processes:
            process.wait_ready()
        ranges = _slot_ranges(ports)
        clients = [redis.Redis(host=HOST, port=port) for port in ports]
        for client, (start, end, _) in zip(clients, ranges, strict=True):
            client.execute_command("CLUSTER ADDSLOTSRANGE", start, end)
        for port, bus_port in zip(ports[1:], bus_ports[1:], strict=True):
            clients[0].execute_command("CLUSTER MEET", HOST, port, bus_port)

        def formed() -> bool:
            return all(_agrees(client, ranges) for client in clients)

        wait_until(formed, timeout=30, what="the Redis Cluster to form", interval=0.05)
        for client in clients:
            client.close()
    except BaseException:
        for process in processes:
            process.stop()
        raise
    url = "redis+cluster://" + ",".join(f"{HOST}:{port}" for port in ports)
    return processes, RedisTopology("cluster", url, list(ports), ranges)


def _slot_ranges(ports: list[int]) -> list[tuple[int, int, int]]:
    step = SLOTS // len(ports)
    bounds = [i * step for i in range(len(ports))] + [SLOTS]
    return [(bounds[i], bounds[i + 1] - 1, port) for i, port in enumerate(ports)]


def _agrees(client: redis.Redis, ranges: list[tuple[int, int, int]]) -> bool:
    info = client.cluster("INFO")
    nodes = len({port for _, _, port in ranges})
    if info.get("cluster_state") != "ok" or int(info.get("cluster_known_nodes", 0)) != nodes:
        return False
    seen = sorted(
        (int(s[0]), int(s[1]), int(s[2][1])) for s in client.execute_command("CLUSTER SLOTS")
    )
    return seen == sorted(ranges)


def move_slot(topology: RedisTopology, slot: int, to_port: int) -> int:
    """Reshard one slot (and its keys) to the node on ``to_port``, as ``redis-cli
    --cluster reshard`` does; returns once every node agrees. Returns the old owner."""
    from_port = next(port for start, end, port in topology.slot_owner if start <= slot <= end)
    clients = {port: redis.Redis(host=HOST, port=port) for port in topology.nodes}
    try:
        source, target = clients[from_port], clients[to_port]
        source_id = source.execute_command("CLUSTER MYID").decode()
        target_id = target.execute_command("CLUSTER MYID").decode()
        target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
        source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
        while keys := source.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
            source.execute_command("MIGRATE", HOST, to_port, "", 0, 5000, "KEYS", *keys)
        for port in [
            to_port,
            from_port,
            *(p for p in topology.nodes if p not in (to_port, from_port)),
        ]:
            clients[port].execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
        topology.slot_owner = _with_owner(topology.slot_owner, slot, to_port)

        def agreed() -> bool:
            return all(_agrees(client, topology.slot_owner) for client in clients.values())

        wait_until(agreed, timeout=30, what=f"every node to see slot {slot} moved", interval=0.02)
    finally:
        for client in clients.values():
            client.close()
    return from_port


def _with_owner(
    ranges: list[tuple[int, int, int]], slot: int, port: int
) -> list[tuple[int, int, int]]:
    """The slot ranges with ``slot`` given to ``port`` (neighbours merged)."""
    owners = [0] * SLOTS
    for start, end, owner in ranges:
        owners[start : end + 1] = [owner] * (end - start + 1)
    owners[slot] = port
    merged: list[tuple[int, int, int]] = []
    for index, owner in enumerate(owners):
        if merged and merged[-1][2] == owner and merged[-1][1] == index - 1:
            merged[-1] = (merged[-1][0], index, owner)
        else:
            merged.append((index, index, owner))
    return merged


@dataclass
class SentinelSetup:
    """A master, its replica and one sentinel watching them as ``mymaster``."""

    master: ManagedProcess
    replica: ManagedProcess
    sentinel: ManagedProcess
    master_port: int
    replica_port: int
    sentinel_port: int
    service: str = "mymaster"

    @property
    def url(self) -> str:
        return f"redis+sentinel://{HOST}:{self.sentinel_port}/{self.service}/0"

    def stop(self) -> None:
        for process in (self.sentinel, self.replica, self.master):
            process.stop()


def start_sentinel(
    data_dir: Path, master_port: int, replica_port: int, sentinel_port: int
) -> SentinelSetup:
    """Start a master, a replica of it and a sentinel (quorum 1, a master is
    down after 500 ms without an answer); returns once the sentinel knows the
    replica, so a failover has somewhere to go."""
    # A replica's first sync waits 5 s by default (for more replicas to share it).
    master = redis_node(
        data_dir / "master", master_port, "--repl-diskless-sync-delay", "0", name="redis master"
    )
    replica = redis_node(
        data_dir / "replica",
        replica_port,
        "--replicaof",
        HOST,
        str(master_port),
        name="redis replica",
    )
    sentinel_dir = data_dir / "sentinel"
    sentinel_dir.mkdir(parents=True, exist_ok=True)
    config = sentinel_dir / "sentinel.conf"
    config.write_text(
        f"port {sentinel_port}\nbind {HOST}\ndir {sentinel_dir}\n"
        f"sentinel monitor mymaster {HOST} {master_port} 1\n"
        "sentinel down-after-milliseconds mymaster 500\n"
        "sentinel failover-timeout mymaster 10000\n"
    )
    sentinel = ManagedProcess(
        f"redis sentinel :{sentinel_port}",
        [shutil.which("redis-server") or "redis-server", str(config), "--sentinel"],
        log_path=sentinel_dir / "sentinel.log",
        ready=lambda: port_open(HOST, sentinel_port),
        ready_timeout=30,
    )
    setup = SentinelSetup(master, replica, sentinel, master_port, replica_port, sentinel_port)
    for process in (master, replica):
        process.start(wait=False)
    try:
        for process in (master, replica):
            process.wait_ready()
        # The sentinel learns replicas from the master's INFO, which it reads at
        # once and then every 10 s: start it once the replica is in sync.
        with redis.Redis(host=HOST, port=replica_port) as replica_client:
            wait_until(
                lambda: replica_client.info("replication").get("master_link_status") == "up",
                timeout=30,
                what="the replica to sync",
            )
        sentinel.start()
        watcher = redis.Redis(host=HOST, port=sentinel_port)

        def replica_known() -> bool:
            replicas = watcher.sentinel_slaves("mymaster")
            return any(
                int(r["port"]) == replica_port
                and r.get("master-link-status") == "ok"
                and not (r["is_sdown"] or r["is_odown"])
                for r in replicas
            )

        wait_until(replica_known, timeout=30, what="the sentinel to see the replica")
        watcher.close()
    except BaseException:
        setup.stop()
        raise
    return setup
