"""The MongoDB archive against the real nx-27017 wire server: runs, messages,
node reports, graphs and worker catalogs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.graph_spec import EdgeSpec, GraphSpec, NodeSpec
from spindle.shared.contracts.runs import NodeReport, NodeStatus, RunStatus
from spindle.shared.graphs.catalog import Catalog, NodeTypeInfo, ToolInfo
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import (
    MESSAGE_PAGES,
    NODE_REPORT_PAGES,
    PAGE_MAX_BYTES,
    PAGE_MAX_MESSAGES,
    ArchiveWrite,
    MessagesToPage,
    OpenPages,
    PageState,
    RunArchive,
    RunRecord,
    message_entries,
    message_id,
    message_pages,
    node_report_pages,
    node_report_write,
    page_messages,
)

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def run_record(workflow_id: str, **overrides: object) -> RunRecord:
    fields: dict[str, object] = {
        "workflow_id": workflow_id,
        "run_id": "run-" + workflow_id,
        "graph_name": "demo",
        "status": RunStatus.RUNNING,
        "created_at": T0,
        "updated_at": T0,
    }
    fields.update(overrides)
    return RunRecord.model_validate(fields)


def stored(seq: int) -> StoredMessage:
    ts = 1_700_000_000_000 + seq
    return StoredMessage(seq, ts, b'{"ts":%d,"t":3,"m":"n\xc2\xb0 %d"}' % (ts, seq))


async def test_run_create_get_update(archive: RunArchive) -> None:
    wf = unique("wf")
    record = run_record(
        wf,
        tenant_id="acme",
        user_id="u1",
        input={"question": "why?"},
        context={"locale": "fr"},
        current_nodes=["ask"],
        pending_input={"node_id": "ask", "prompt": "Name?", "ui_schema": {"type": "object"}},
        temporal_ui_url="http://127.0.0.1:8233/namespaces/default/workflows/" + wf,
    )
    await archive.create_run(record)
    await archive.create_run(record)  # idempotent

    got = await archive.get_run(wf)
    assert got == record
    assert got is not None and got.created_at.tzinfo is not None
    assert await archive.runs.count_documents({"_id": wf}) == 1

    assert await archive.update_run(
        wf, status=RunStatus.COMPLETED, output={"answer": 42}, current_nodes=[], pending_input=None
    )
    updated = await archive.get_run(wf)
    assert updated is not None
    assert updated.status == "completed"
    assert (updated.output, updated.current_nodes, updated.pending_input) == (
        {"answer": 42},
        [],
        None,
    )
    assert updated.created_at == T0
    assert updated.updated_at.tzinfo is not None
    assert updated.updated_at > T0  # set by the update
    assert (updated.input, updated.context, updated.user_id) == (record.input, record.context, "u1")

    explicit = T0 + timedelta(hours=1)
    await archive.update_run(wf, error="boom", updated_at=explicit)
    again = await archive.get_run(wf)
    assert again is not None
    assert (again.error, again.updated_at) == ("boom", explicit)

    assert await archive.get_run(unique("missing")) is None
    assert await archive.update_run(unique("missing"), status="failed") is False
    with pytest.raises(ValueError, match="no_such_field"):
        await archive.update_run(wf, no_such_field=1)


async def test_progress_reported_before_the_run_is_created_is_kept(archive: RunArchive) -> None:
    """The worker may pause a run before the gateway has archived its start."""
    wf = unique("wf")
    identity = {"run_id": "run-" + wf, "tenant_id": "acme", "graph_name": "demo"}
    assert await archive.update_run(
        wf, create_with=identity, status=RunStatus.PAUSED, pending_input={"node_id": "ask"}
    )
    await archive.create_run(run_record(wf, tenant_id="acme", input={"topic": "x"}))

    got = await archive.get_run(wf)
    assert got is not None
    assert got.status == "paused"  # not overwritten back to "running"
    assert got.pending_input == {"node_id": "ask"}
    assert (got.graph_name, got.input, got.tenant_id) == ("demo", {"topic": "x"}, "acme")
    assert await archive.runs.count_documents({"_id": wf}) == 1


async def test_list_runs_filters_pages_and_counts(archive: RunArchive) -> None:
    tenant, other_tenant = unique("tenant"), unique("tenant")
    ids = [unique("wf") for _ in range(7)]
    for i, wf in enumerate(ids):
        await archive.create_run(
            run_record(
                wf,
                tenant_id=tenant,
                graph_name="alpha" if i % 2 == 0 else "beta",
                status="completed" if i < 3 else "running",
                created_at=T0 + timedelta(minutes=i),
            )
        )
    await archive.create_run(run_record(unique("wf"), tenant_id=other_tenant))
    newest_first = list(reversed(ids))

    runs, total = await archive.list_runs(tenant_id=tenant)
    assert ([r.workflow_id for r in runs], total) == (newest_first, 7)

    page, total = await archive.list_runs(tenant_id=tenant, limit=3, offset=2)
    assert ([r.workflow_id for r in page], total) == (newest_first[2:5], 7)
    last_page, _ = await archive.list_runs(tenant_id=tenant, limit=3, offset=6)
    assert [r.workflow_id for r in last_page] == newest_first[6:]

    running, total = await archive.list_runs(tenant_id=tenant, status=RunStatus.RUNNING)
    assert ([r.workflow_id for r in running], total) == (newest_first[:4], 4)

    alpha_done, total = await archive.list_runs(
        tenant_id=tenant, status="completed", graph_name="alpha"
    )
    assert ([r.workflow_id for r in alpha_done], total) == ([ids[2], ids[0]], 2)

    empty, total = await archive.list_runs(tenant_id=tenant, graph_name="gamma")
    assert (empty, total) == ([], 0)
    _, all_total = await archive.list_runs()
    assert all_total >= 8


async def test_save_messages_is_idempotent_and_reads_in_seq_order(archive: RunArchive) -> None:
    stream = unique("stream")
    assert await archive.save_messages(stream, [stored(s) for s in (3, 1, 2)]) == 3
    # A retried archive step re-saves some messages along with new ones.
    assert await archive.save_messages(stream, [stored(s) for s in range(1, 7)]) == 3
    assert await archive.save_messages(stream, [stored(s) for s in range(1, 7)]) == 0
    assert await archive.save_messages(stream, []) == 0
    await archive.save_messages(unique("other"), [stored(1)])

    # Each save is one page document; a seq is stored once.
    pages = await archive.message_pages.find({"stream_id": stream}).sort("first_seq").to_list()
    assert [(p["first_seq"], p["last_seq"]) for p in pages] == [(1, 3), (4, 6)]
    messages = await archive.messages(stream)
    assert messages == [stored(s) for s in range(1, 7)]
    assert [m.seq for m in await archive.messages(stream, after_seq=4)] == [5, 6]
    assert [m.seq for m in await archive.messages(stream, after_seq=1, limit=2)] == [2, 3]
    assert await archive.messages(stream, limit=0) == []
    assert pages[0]["messages"][1]["raw"] == stored(2).raw.decode()


async def test_messages_archived_one_document_each_are_read_with_the_pages(
    archive: RunArchive,
) -> None:
    # An archive written before pages: one document per message.
    stream = unique("stream")
    await archive.messages_coll.insert_many(
        [
            {"_id": message_id(stream, s), "stream_id": stream, "seq": s, "ts": s, "raw": "{}"}
            for s in (1, 2)
        ]
    )
    assert message_id(stream, 2) == f"{stream}:000000000002"
    assert await archive.save_messages(stream, [stored(s) for s in (2, 3)]) == 1
    assert [m.seq for m in await archive.messages(stream)] == [1, 2, 3]
    assert [m.raw for m in await archive.messages(stream)][:2] == [b"{}", b"{}"]


def test_pages_are_cut_by_count_and_by_bytes_and_hold_each_seq_once() -> None:
    entries = [{"seq": s, "ts": s, "raw": "x"} for s in range(PAGE_MAX_MESSAGES + 2, 0, -1)]
    pages = message_pages("s", [*entries, {"seq": 1, "ts": 9, "raw": "again"}])
    assert [(p["first_seq"], p["last_seq"]) for p in pages] == [
        (1, PAGE_MAX_MESSAGES),
        (PAGE_MAX_MESSAGES + 1, PAGE_MAX_MESSAGES + 2),
    ]
    assert pages[0]["messages"][0]["raw"] == "x"  # the first of a seq wins
    assert pages[0]["_id"] == f"s:{1:012d}-{PAGE_MAX_MESSAGES:012d}"
    big = "y" * (PAGE_MAX_BYTES // 2 + 1)
    halves = message_pages("s", [{"seq": s, "ts": s, "raw": big} for s in (1, 2, 3)])
    assert [len(p["messages"]) for p in halves] == [1, 1, 1]


async def test_node_reports_are_idempotent_and_in_execution_order(archive: RunArchive) -> None:
    wf = unique("wf")

    def report(node: str, second: int, status: NodeStatus, visit: int = 1) -> NodeReport:
        return NodeReport(
            node_id=node,
            node_type="tool",
            status=status,
            visit=visit,
            started_at=(T0 + timedelta(seconds=second)).isoformat(),
            duration_ms=12.5,
        )

    # Saved out of order (parallel branches finish in any order); `fetch` retried.
    await archive.save_node_report(wf, report("summarise", 3, NodeStatus.SUCCESS))
    await archive.save_node_report(wf, report("fetch", 1, NodeStatus.FAILED), input={"url": "x"})
    await archive.save_node_report(
        wf, report("fetch", 1, NodeStatus.SUCCESS), input={"url": "x"}, output={"payload": [1]}
    )
    await archive.save_node_report(wf, report("fetch", 5, NodeStatus.SUCCESS, visit=2))
    await archive.save_node_report(unique("wf"), report("fetch", 0, NodeStatus.SUCCESS))

    reports = await archive.node_reports(wf)
    assert [(r["node_id"], r["visit"]) for r in reports] == [
        ("fetch", 1),
        ("summarise", 1),
        ("fetch", 2),
    ]
    first = reports[0]
    assert first["status"] == "SUCCESS"
    assert (first["input"], first["output"]) == ({"url": "x"}, {"payload": [1]})
    assert first["workflow_id"] == wf and first["duration_ms"] == 12.5
    assert NodeReport.model_validate(first).node_type == "tool"
    assert await archive.node_reports(unique("none")) == []


async def test_a_batch_of_a_run_s_node_reports_is_one_page_and_later_saves_replace(
    archive: RunArchive,
) -> None:
    wf, other = unique("wf"), unique("wf")

    def save(node: str, visit: int, attempt: int = 1, status: str = "SUCCESS") -> ArchiveWrite:
        report = NodeReport(
            node_id=node,
            node_type="tool",
            status=NodeStatus(status),
            attempt=attempt,
            visit=visit,
            started_at=(T0 + timedelta(seconds=visit)).isoformat(),
        )
        return ("node_report_pages", node_report_write(wf, report, output={"v": visit}))

    # An archiver batch: 300 node executions of one run, one of them saved twice
    # (its last save counts), and one report of another run.
    batch = [save("step", visit) for visit in range(1, 301)]
    batch.insert(10, save("step", 200, status="FAILED"))
    other_report = NodeReport(node_id="x", node_type="tool", status=NodeStatus.SUCCESS)
    batch.append(("node_report_pages", node_report_write(other, other_report)))
    await archive.bulk_apply(batch)
    assert await archive.node_report_pages.count_documents({"workflow_id": wf}) == 1
    # The outbox replays a batch MongoDB may already have taken: nothing changes.
    await archive.bulk_apply(batch)
    assert await archive.node_report_pages.count_documents({"workflow_id": wf}) == 1

    reports = await archive.node_reports(wf)
    assert [r["visit"] for r in reports] == list(range(1, 301))
    assert {r["status"] for r in reports} == {"SUCCESS"}
    assert reports[199]["output"] == {"v": 200} and "key" not in reports[0]
    first_saved = reports[0]["recorded_at"]

    # A later batch retries visit 1 (attempt 2, failed this time): it replaces the
    # first, which keeps its first save time; a run archived before report pages
    # (one document per report) is read with them.
    await archive.bulk_apply([save("step", 1, attempt=2, status="FAILED")])
    await archive.node_reports_coll.insert_one(
        {"_id": f"{wf}:legacy:1", "workflow_id": wf, "node_id": "legacy", "visit": 1}
    )
    reports = await archive.node_reports(wf)
    assert [(r["node_id"], r["visit"]) for r in reports][:2] == [("legacy", 1), ("step", 1)]
    assert (reports[1]["status"], reports[1]["attempt"]) == ("FAILED", 2)
    assert reports[1]["recorded_at"] == first_saved
    assert len(reports) == 301
    assert [r["node_id"] for r in await archive.node_reports(other)] == ["x"]


def step_report(wf: str, visit: int, attempt: int = 1, status: str = "SUCCESS") -> ArchiveWrite:
    report = NodeReport(
        node_id="step",
        node_type="tool",
        status=NodeStatus(status),
        attempt=attempt,
        visit=visit,
        started_at=(T0 + timedelta(seconds=visit)).isoformat(),
    )
    return (NODE_REPORT_PAGES, node_report_write(wf, report, output={"v": visit}))


def posted(stream: str, *seqs: int) -> ArchiveWrite:
    return (MESSAGE_PAGES, MessagesToPage(stream, message_entries([stored(s) for s in seqs])))


class PageStates:
    """The open pages' states as the archive outbox keeps them: a batch is planned
    from them, and its new ones are kept once MongoDB has it."""

    def __init__(self, **limits: int) -> None:
        self.states: dict[str, PageState] = {}
        self.limits = limits

    async def write(self, archive: RunArchive, batch: list[ArchiveWrite]) -> None:
        pages = OpenPages(self.states, **self.limits)
        await archive.bulk_apply(batch, pages=pages)
        self.states.update(pages.staged)


async def test_the_archiver_s_batches_of_a_run_go_on_one_open_page_each(
    archive: RunArchive,
) -> None:
    """Batches cut short (one per node, as ``finish_run``s cut them under load)
    add to the run's open pages: one message page and one report page a run."""
    wf = unique("wf")
    states = PageStates()
    for visit in range(1, 6):
        before = dict(states.states)
        batch = [posted(wf, 2 * visit - 1, 2 * visit), step_report(wf, visit)]
        await states.write(archive, batch)
    # The last batch written again from the states before it (the drainer died
    # before taking it off the queue): the same fields are set again.
    await archive.bulk_apply(batch, pages=OpenPages(before))
    # A later batch retries visit 2 (attempt 2, failed this time): the fold
    # prefers it, and the report keeps its first save time.
    first_saved = (await archive.node_reports(wf))[1]["recorded_at"]
    await states.write(archive, [step_report(wf, 2, attempt=2, status="FAILED")])

    assert await archive.message_pages.count_documents({"stream_id": wf}) == 1
    assert await archive.node_report_pages.count_documents({"workflow_id": wf}) == 1
    assert await archive.messages(wf) == [stored(s) for s in range(1, 11)]
    assert [m.seq for m in await archive.messages(wf, after_seq=3, limit=2)] == [4, 5]
    reports = await archive.node_reports(wf)
    assert [(r["visit"], r["status"]) for r in reports] == [
        (1, "SUCCESS"),
        (2, "FAILED"),
        (3, "SUCCESS"),
        (4, "SUCCESS"),
        (5, "SUCCESS"),
    ]
    assert reports[1]["recorded_at"] == first_saved and reports[4]["output"] == {"v": 5}
    assert "key" not in reports[0] and "saved" not in reports[0]


async def test_an_open_page_closes_when_full_and_a_retry_goes_on_the_next(
    archive: RunArchive,
) -> None:
    wf = unique("wf")
    states = PageStates(max_entries=3)
    await states.write(archive, [posted(wf, 1, 2), step_report(wf, 1), step_report(wf, 2)])
    await states.write(archive, [posted(wf, 3, 4, 5, 6, 7), step_report(wf, 3)])
    await states.write(archive, [step_report(wf, 1, attempt=2, status="FAILED")])

    found = await archive.message_pages.find({"stream_id": wf}).sort("first_seq").to_list()
    assert [(p["first_seq"], p["last_seq"]) for p in found] == [(1, 3), (4, 6), (7, 7)]
    assert [sorted(int(m["seq"]) for m in page_messages(p)) for p in found] == [
        [1, 2, 3],
        [4, 5, 6],
        [7],
    ]
    assert await archive.node_report_pages.count_documents({"workflow_id": wf}) == 2
    reports = await archive.node_reports(wf)
    assert [(r["visit"], r["status"]) for r in reports] == [
        (1, "FAILED"),
        (2, "SUCCESS"),
        (3, "SUCCESS"),
    ]


async def test_a_run_s_reports_of_two_streams_in_one_batch_go_on_a_page_each(
    archive: RunArchive,
) -> None:
    """A report page names the stream it is pruned with: a run whose reports
    name two streams has an open page for each."""
    wf, parent = unique("wf"), unique("parent")
    child_report = NodeReport(node_id="b", node_type="tool", status=NodeStatus.SUCCESS)
    on_parent = node_report_write(wf, child_report, extra={"stream_id": parent})
    batch = [step_report(wf, 1), (NODE_REPORT_PAGES, on_parent)]
    await archive.bulk_apply(batch, pages=OpenPages())
    pages = await archive.node_report_pages.find({"workflow_id": wf}).to_list()
    assert sorted(page["stream_id"] for page in pages) == sorted([wf, parent])
    assert [r["node_id"] for r in await archive.node_reports(wf)] == ["b", "step"]


async def test_a_batch_planned_again_onto_new_pages_is_read_once(archive: RunArchive) -> None:
    """A batch that opened pages, written again from the states before it, opens
    pages of its own (never adding to one its states do not count)."""
    wf = unique("wf")
    batch = [posted(wf, 1, 2), step_report(wf, 1)]
    await archive.bulk_apply(batch, pages=OpenPages())
    await archive.bulk_apply(batch, pages=OpenPages())
    assert await archive.message_pages.count_documents({"stream_id": wf}) == 2
    assert [m.seq for m in await archive.messages(wf)] == [1, 2]
    assert [r["visit"] for r in await archive.node_reports(wf)] == [1]


def test_report_pages_are_cut_by_bytes() -> None:
    big = "z" * (PAGE_MAX_BYTES // 2 + 1)
    reports = [{"key": f"w:n:{v}", "visit": v, "output": big} for v in (1, 2, 3)]
    pages = node_report_pages("w", "w", reports)
    assert [len(p["reports"]) for p in pages] == [1, 1, 1]
    assert len({p["_id"] for p in pages}) == 3
    assert node_report_pages("w", "w", reports)[0]["_id"] == pages[0]["_id"]


async def test_graphs_round_trip(archive: RunArchive) -> None:
    tenant = unique("tenant")
    name = unique("graph")
    spec = GraphSpec(
        name=name,
        entry="ask",
        nodes=[
            NodeSpec(id="ask", type="prompt", params={"prompt": "Name?"}),
            NodeSpec(id="done", type="output", inputs={"value": "ask.name"}),
        ],
        edges=[EdgeSpec.model_validate({"from": "ask", "to": "done", "when": "ask.name"})],
    )
    await archive.save_graph(spec, tenant_id=tenant)
    assert await archive.get_graph(name, tenant_id=tenant) == spec
    assert await archive.get_graph(name, tenant_id=unique("other-tenant")) is None

    changed = spec.model_copy(update={"description": "v2", "version": "2"})
    await archive.save_graph(changed, tenant_id=tenant)
    assert await archive.get_graph(name, tenant_id=tenant) == changed
    assert await archive.graphs.count_documents({"tenant_id": tenant, "name": name}) == 1

    other = spec.model_copy(update={"name": "a-" + name})
    await archive.save_graph(other, tenant_id=tenant)
    assert [g.name for g in await archive.list_graphs(tenant_id=tenant)] == ["a-" + name, name]
    assert {g.name for g in await archive.list_graphs()} >= {name, "a-" + name}
    assert await archive.get_graph(unique("missing"), tenant_id=tenant) is None


async def test_catalogs_of_several_workers_add_up(archive: RunArchive) -> None:
    await archive.delete_catalogs()
    assert await archive.get_catalog() is None

    search_worker = Catalog(tools={"search": ToolInfo(name="search")}, tools_known=True)
    media_worker = Catalog(
        node_types={"transcode": NodeTypeInfo(name="transcode", description="video")},
        tools={"ffprobe": ToolInfo(name="ffprobe")},
        tools_known=True,
    )
    await archive.save_catalog(search_worker, worker_id="search-1")
    await archive.save_catalog(media_worker, worker_id="media-1")

    merged = await archive.get_catalog()
    assert merged is not None
    assert set(merged.tools) == {"search", "ffprobe"}
    assert set(merged.node_types) == {"transcode"}
    assert merged.tools_known

    # A worker republishing replaces only its own contribution.
    upgraded = Catalog(tools={"search_v2": ToolInfo(name="search_v2")}, tools_known=True)
    await archive.save_catalog(upgraded, worker_id="search-1")
    merged = await archive.get_catalog()
    assert merged is not None and set(merged.tools) == {"search_v2", "ffprobe"}

    # Without an identity, identical catalogs share one document.
    first = await archive.save_catalog(Catalog.builtin())
    second = await archive.save_catalog(Catalog.builtin())
    assert first == second
    assert await archive.catalogs.count_documents({}) == 3
    merged = await archive.get_catalog()
    assert merged is not None and set(Catalog.builtin().node_types) <= set(merged.node_types)


async def test_from_settings_and_ping(mongo_url: str) -> None:
    configured = RunArchive.from_settings(
        Settings(mongo_url=mongo_url, mongo_db=unique("spindle_cfg").replace("-", "_"))
    )
    try:
        assert await configured.ping()
        await configured.ensure_indexes()
        await configured.ensure_indexes()  # idempotent
        # Compare key fields only: nx-27017 renames indexes and lists them ascending.
        keys = {tuple(index["key"]) async for index in await configured.runs.list_indexes()}
        assert {("tenant_id", "created_at"), ("tenant_id", "status"), ("graph_name",)} <= keys
        message_indexes = [i async for i in await configured.messages_coll.list_indexes()]
        assert any(
            tuple(i["key"]) == ("stream_id", "seq") and i.get("unique") for i in message_indexes
        )
        page_indexes = [i async for i in await configured.message_pages.list_indexes()]
        assert any(tuple(i["key"]) == ("stream_id", "last_seq") for i in page_indexes)
        wf = unique("wf")
        await configured.create_run(run_record(wf))
        got = await configured.get_run(wf)
        assert got is not None and got.created_at == T0
        await configured.database.client.drop_database(configured.database.name)
    finally:
        await configured.close()


async def test_integers_beyond_64_bits_are_archived_as_strings_not_dropped(
    archive: RunArchive,
) -> None:
    # A tool may return 10**100; BSON has no such integer and used to fail the write.
    wf = unique("wf")
    await archive.create_run(run_record(wf))
    big = {"value": 10**100, "small": 2**63 - 1, "low": -(2**63) - 1, "flag": True}
    assert await archive.update_run(wf, status=RunStatus.COMPLETED, output=big)
    got = await archive.get_run(wf)
    assert got is not None and got.status == "completed"
    assert got.output == {
        "value": str(10**100),
        "small": 2**63 - 1,
        "low": str(-(2**63) - 1),
        "flag": True,
    }
    report = NodeReport(
        node_id="calc", node_type="tool", status=NodeStatus.SUCCESS, started_at=T0.isoformat()
    )
    await archive.save_node_report(wf, report, input={"n": 10**100}, output=[10**100])
    (saved,) = await archive.node_reports(wf)
    assert (saved["input"], saved["output"]) == ({"n": str(10**100)}, [str(10**100)])
