"""The whole stack on a Redis Cluster: a worker and a gateway process whose
``SPINDLE_REDIS_URL`` is ``redis+cluster://`` (three real masters). A run posts
through the bus scripts, the gateway streams it live over sharded pub/sub,
takes a stream slot and counts rate limits there, and a signal sent through
the gateway reaches the run."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from spindle.dev.processes import free_port
from spindle.shared.platform.settings import Settings
from tests.e2e.conftest import Caller, SpindleStack, client_for, example_graph, running_stack
from tests.e2e.run_driver import T, answer, assert_contiguous, start, updates
from tests.e2e.sse_client import open_sse
from tests.integration.redis_topologies import RedisTopology

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
async def cluster_stack(
    e2e_settings: Settings,
    temporal_client: Client,
    artifacts_dir: Path,
    redis_cluster: RedisTopology,
) -> AsyncIterator[SpindleStack]:
    settings = e2e_settings.model_copy(
        update={
            "redis_url": redis_cluster.url,
            "task_queue": f"cluster-{uuid.uuid4().hex[:8]}",
            "gateway_port": free_port(),
        }
    )
    async with running_stack(settings, temporal_client, artifacts_dir / "redis-cluster") as up:
        yield up


async def test_a_run_streams_live_and_takes_a_signal_on_a_redis_cluster(
    cluster_stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    async with client_for(cluster_stack, callers["alice"]) as http:
        graph = example_graph("approval-flow")
        assert (await http.put(f"/graphs/{graph['name']}", json=graph)).status_code in (200, 201)
        run = await start(http, graph="approval-flow", input={"topic": "cluster budget"})
        async with open_sse(http, run["stream_url"]) as sse:
            assert sse.response.status_code == 200
            await sse.until_type(T.REQUEST_INPUT)
            reply = await answer(http, run, {"data": {"decision": "approve"}})
            assert reply.status_code == 200, reply.text
            await sse.read_to_end(timeout=60)
        assert sse.ended
        assert_contiguous(sse.events)
        assert sse.events[-1].json()["t"] == T.COMPLETE
        # The history (the run's capped list on its slot's node) has what streamed.
        stored = await updates(http, run)
        assert [m["t"] for m in stored] == [e.json()["t"] for e in sse.events]
