"""The claim check for Temporal payloads: large payloads go to MongoDB (the
nx-27017 wire server) and travel as references, so a run whose data exceeds
Temporal's 2 MB limit still completes on the real dev server."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import uuid
from collections.abc import AsyncIterator

import orjson
import pytest
from pymongo import AsyncMongoClient
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import GraphSpec, NodeSpec
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
)
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.temporal.payload_offload import (
    CHUNKS_COLLECTION,
    OFFLOADED_ENCODING,
    PAYLOADS_COLLECTION,
    OffloadedPayloadMissing,
    OffloadingPayloadCodec,
    reference_payload,
)
from spindle.worker.main import build_worker

pytestmark = pytest.mark.integration

TEMPORAL_BLOB_LIMIT = 2 * 1024 * 1024
THRESHOLD = 4096


@pytest.fixture(scope="module")
def offload_settings(mongo_url: str) -> Settings:
    return Settings(mongo_url=mongo_url, mongo_db=f"spindle_offload_{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
async def db_client(
    mongo_url: str, offload_settings: Settings
) -> AsyncIterator[AsyncMongoClient[dict[str, object]]]:
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(mongo_url)
    yield client
    await client.drop_database(offload_settings.mongo_db)
    await client.close()


@pytest.fixture
async def codec(offload_settings: Settings) -> AsyncIterator[OffloadingPayloadCodec]:
    made = OffloadingPayloadCodec(offload_settings, threshold=THRESHOLD)
    yield made
    await made.close()


def json_payload(data: bytes) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=data)


async def stored_headers(client: AsyncMongoClient[dict[str, object]], settings: Settings) -> int:
    return await client[settings.mongo_db][PAYLOADS_COLLECTION].count_documents({})


async def stored_chunks(client: AsyncMongoClient[dict[str, object]], settings: Settings) -> int:
    return await client[settings.mongo_db][CHUNKS_COLLECTION].count_documents({})


async def test_large_payloads_round_trip_through_mongo(
    codec: OffloadingPayloadCodec, offload_settings: Settings
) -> None:
    large = json_payload(orjson.dumps("é" * 400_000))  # 800 kB: several chunks
    small = json_payload(b'"hello"')

    encoded = await codec.encode([small, large, small])

    assert encoded[0] == small and encoded[2] == small  # untouched, in place
    reference = encoded[1]
    assert reference.metadata["encoding"] == OFFLOADED_ENCODING
    assert reference.ByteSize() < 200
    ref = orjson.loads(reference.data)
    assert ref["sha256"] == hashlib.sha256(large.SerializeToString(deterministic=True)).hexdigest()
    # A codec with nothing cached (another process) reads it back from MongoDB.
    elsewhere = OffloadingPayloadCodec(offload_settings, threshold=THRESHOLD)
    try:
        assert await elsewhere.decode(encoded) == [small, large, small]
    finally:
        await elsewhere.close()


async def test_storing_the_same_payload_twice_is_a_no_op(
    codec: OffloadingPayloadCodec,
    offload_settings: Settings,
    db_client: AsyncMongoClient[dict[str, object]],
) -> None:
    payload = json_payload(secrets.token_bytes(300_000))
    first = await codec.encode([payload])
    headers, chunks = (
        await stored_headers(db_client, offload_settings),
        await stored_chunks(db_client, offload_settings),
    )

    again = OffloadingPayloadCodec(offload_settings, threshold=THRESHOLD)  # no cache
    try:
        assert await again.encode([payload]) == first
    finally:
        await again.close()
    assert await stored_headers(db_client, offload_settings) == headers
    assert await stored_chunks(db_client, offload_settings) == chunks


async def test_the_threshold_is_the_serialized_size(codec: OffloadingPayloadCodec) -> None:
    data = b"x" * THRESHOLD
    while json_payload(data).ByteSize() > THRESHOLD:
        data = data[:-1]
    at_limit = json_payload(data)
    assert at_limit.ByteSize() == THRESHOLD
    over = json_payload(at_limit.data + b"x")

    encoded = await codec.encode([at_limit, over])

    assert encoded[0] == at_limit
    assert encoded[1].metadata["encoding"] == OFFLOADED_ENCODING


async def test_an_unknown_reference_is_reported(codec: OffloadingPayloadCodec) -> None:
    missing = reference_payload("0" * 64, 10)
    with pytest.raises(OffloadedPayloadMissing, match=r"0{64}"):
        await codec.decode([missing])


async def test_small_payloads_never_touch_mongo() -> None:
    # Nothing listens on port 1: any Mongo call would fail after its timeout.
    nowhere = Settings(mongo_url="mongodb://127.0.0.1:1", mongo_db="none")
    codec = OffloadingPayloadCodec(nowhere)
    payloads = [json_payload(b'{"a": 1}'), Payload(data=b"")]
    assert await codec.encode(payloads) == payloads
    assert await codec.decode(payloads) == payloads
    await codec.close()


# -- end to end on the Temporal dev server ----------------------------------

TASK_QUEUE = f"offload-{uuid.uuid4().hex[:8]}"
ECHO_CONTEXT = GraphSpec(
    name="echo-context",
    entry="out",
    nodes=[NodeSpec(id="out", type="output", params={"select": "context.blob"})],
)


@pytest.fixture(scope="module")
async def worker(temporal_client: Client, settings: Settings) -> AsyncIterator[Worker]:
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    try:
        running = build_worker(
            temporal_client, settings, bus=bus, archive=archive, task_queue=TASK_QUEUE
        )
        async with running:
            yield running
    finally:
        await bus.close()
        await archive.close()


async def test_a_run_with_a_3_mb_input_completes(worker: Worker, temporal_client: Client) -> None:
    blob = secrets.token_urlsafe(2_300_000)  # about 3 MB of text
    assert len(blob) > TEMPORAL_BLOB_LIMIT

    handle = await temporal_client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=ECHO_CONTEXT, input={}, context={"blob": blob}),
        id=f"offload-{uuid.uuid4().hex[:10]}",
        task_queue=TASK_QUEUE,
        result_type=GraphRunResult,
    )
    result: GraphRunResult = await asyncio.wait_for(handle.result(), 60)

    assert result.status == RunStatus.COMPLETED, result.error
    assert result.output == blob
    # Temporal itself only ever held references.
    history = await handle.fetch_history()
    started = next(
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    )
    [start_input] = started.workflow_execution_started_event_attributes.input.payloads
    assert start_input.metadata["encoding"] == OFFLOADED_ENCODING
    assert max(e.ByteSize() for e in history.events) < 64 * 1024
