"""A map's item pages in MongoDB (the nx-27017 wire server): round trip, a retried
attempt replacing its page, counts in page order, large pages, and clean-up."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from pymongo import AsyncMongoClient

from spindle.shared.store.chunked_blobs import CHUNK_SIZE
from spindle.shared.store.item_pages import (
    CHUNKS_COLLECTION,
    INPUT,
    RESULTS,
    ItemPageMissing,
    ItemStore,
    items_key,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def database(mongo_url: str) -> AsyncIterator[object]:
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(
        mongo_url, tz_aware=True, serverSelectionTimeoutMS=5000
    )
    db = client[f"spindle_items_{uuid.uuid4().hex[:8]}"]
    yield db
    await client.drop_database(db.name)
    await client.close()


@pytest.fixture
async def store(database: object) -> ItemStore:
    items = ItemStore(database)  # type: ignore[arg-type]
    await items.ensure_indexes()
    return items


def key() -> str:
    return items_key(f"wf-{uuid.uuid4().hex[:8]}", "run-1", "map", 1)


async def test_pages_round_trip_any_json(store: ItemStore) -> None:
    run = key()
    page = [{"id": "a", "n": 1}, "text", 3.5, None, [1, {"deep": True}]]
    await store.put(run, INPUT, 0, page)
    assert await store.get(run, INPUT, 0) == page
    with pytest.raises(ItemPageMissing, match=f"{run}/{INPUT}/1"):
        await store.get(run, INPUT, 1)


async def test_a_retried_attempt_replaces_its_page_and_counts(
    store: ItemStore, database: object
) -> None:
    run = key()
    await store.put(run, RESULTS, 0, ["first try"], attempt=1, counts={"succeeded": 0, "failed": 1})
    await store.put(run, RESULTS, 1, ["other page"], counts={"succeeded": 1, "failed": 0})
    await store.put(
        run, RESULTS, 0, ["second try"], attempt=2, counts={"succeeded": 1, "failed": 0}
    )

    assert await store.get(run, RESULTS, 0) == ["second try"]
    # Counted once per page, whatever the attempts: progress never double-counts.
    assert await store.counts(run, RESULTS) == [
        {"succeeded": 1, "failed": 0},
        {"succeeded": 1, "failed": 0},
    ]
    chunks = database[CHUNKS_COLLECTION]  # type: ignore[index]
    # The first attempt's chunks are gone with its header.
    assert await chunks.count_documents({"files_id": f"{run}/{RESULTS}/0@1"}) == 0


async def test_an_older_attempt_finishing_late_does_not_replace_a_newer_one(
    store: ItemStore, database: object
) -> None:
    run = key()
    await store.put(run, RESULTS, 0, ["retry"], attempt=2, counts={"succeeded": 1, "failed": 0})
    await store.put(run, RESULTS, 0, ["timed out"], attempt=1, counts={"succeeded": 0, "failed": 1})

    assert await store.get(run, RESULTS, 0) == ["retry"]
    assert await store.counts(run, RESULTS) == [{"succeeded": 1, "failed": 0}]
    chunks = database[CHUNKS_COLLECTION]  # type: ignore[index]
    assert await chunks.count_documents({"files_id": f"{run}/{RESULTS}/0@1"}) == 0


async def test_a_page_larger_than_a_chunk_is_stored_in_chunks(store: ItemStore) -> None:
    run = key()
    page = [{"id": str(i), "text": "x" * 1000} for i in range(600)]  # about 620 KB
    size = await store.put(run, INPUT, 0, page)
    assert size > 2 * CHUNK_SIZE
    assert await store.get(run, INPUT, 0) == page


async def test_delete_removes_every_page_of_a_map_and_only_those(store: ItemStore) -> None:
    run, other = key(), key()
    for page in range(3):
        await store.put(run, INPUT, page, [page])
        await store.put(run, RESULTS, page, [page])
    await store.put(other, INPUT, 0, ["kept"])

    assert await store.delete(run) == 6
    with pytest.raises(ItemPageMissing):
        await store.get(run, INPUT, 0)
    assert await store.counts(run, RESULTS) == []
    assert await store.get(other, INPUT, 0) == ["kept"]
