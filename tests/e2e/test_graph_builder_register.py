"""A graph built in Python (``spindle.graphs``) registered through the SDK and run
on the real stack (docs/graphs/builder.md)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from spindle.client import (
    AsyncSpindleClient,
    ClientConfig,
    ForbiddenError,
    SpindleClient,
    ValidationError,
)
from spindle.graphs import Graph
from spindle.shared.contracts.graph_spec import GraphSpec
from tests.e2e.conftest import Caller, SpindleStack
from tests.polling import eventually

pytestmark = pytest.mark.e2e


def _counting_graph(name: str) -> Graph:
    g = Graph(
        name,
        description="built in Python",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    )
    count = g.tool("count", "word_count", inputs={"args": "{text: input.text}"})
    count >> g.output("report", select="{words: count.words}")
    return g


async def test_a_built_graph_registers_through_the_sdk_and_runs(
    stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    name = f"built-{uuid.uuid4().hex[:8]}"
    config = ClientConfig(base_url=stack.base_url, api_key=callers["alice"].key)
    async with AsyncSpindleClient(config) as client:
        registered = await _counting_graph(name).register_async(client)
        assert isinstance(registered, GraphSpec) and registered.name == name
        assert [n.id for n in registered.nodes] == ["count", "report"]
        run = await client.start_run(name, input={"text": "one two three"})

        async def finished() -> bool:
            return (await client.get_run(run)).status == "completed"

        await eventually(finished, what="the built graph's run completes", timeout=60)
        assert (await client.get_run(run)).output == {"words": 3}


async def test_the_sync_client_registers_and_the_gateway_keeps_its_roles(
    stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    name = f"built-{uuid.uuid4().hex[:8]}"

    def register_as(user: str) -> GraphSpec:
        config = ClientConfig(base_url=stack.base_url, api_key=callers[user].key)
        with SpindleClient(config) as client:
            return _counting_graph(name).register(client)

    with pytest.raises(ForbiddenError):
        await asyncio.to_thread(register_as, "bob")
    assert (await asyncio.to_thread(register_as, "alice")).name == name


async def test_a_document_the_local_checks_miss_is_refused_by_the_gateway(
    stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    config = ClientConfig(base_url=stack.base_url, api_key=callers["alice"].key)
    async with AsyncSpindleClient(config) as client:
        # A plain document sent without the builder's checks: the gateway's 422
        # names the fault.
        bad = {"name": "bad-doc", "entry": "x", "nodes": [{"id": "x", "type": "nope"}]}
        with pytest.raises(ValidationError) as raised:
            await client.register_graph(bad)
        assert "nope" in str(raised.value)
