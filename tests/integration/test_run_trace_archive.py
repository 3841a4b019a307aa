"""Seed 000's run document fields, the ``run_trace`` collection and trace ids on
archived messages, against the real nx-27017 wire server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.runs import NodeReport, NodeStatus, RunStatus
from spindle.shared.store.archive import RunArchive, RunRecord
from spindle.shared.store.run_trace import (
    NodeFinished,
    NodeStarted,
    TraceEntry,
    bounded_output,
    port_data,
    port_key,
    run_trace,
    run_traceparent,
    save_trace,
)
from spindle.worker.archive.operations import QueuedOp, SaveMessages

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TRACE = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"}
IDENTITY = {"run_id": "r1", "tenant_id": "acme", "graph_name": "g"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def envelope(message_id: str, sender: str, at: str, payload: Any = None) -> dict[str, Any]:
    return {"messageId": message_id, "from": sender, "timestamp": at, "payload": payload}


async def replayed(archive: RunArchive, op: NodeStarted | NodeFinished | SaveMessages) -> None:
    """Apply ``op`` as the archive outbox would after an outage: from its JSON."""
    queued = QueuedOp.model_validate_json(QueuedOp(op=op, queued_at_ms=0).model_dump_json())
    await queued.op.apply(archive)


async def test_the_run_document_carries_seed_000_fields(archive: RunArchive) -> None:
    wf = unique("wf")
    await archive.create_run(
        RunRecord(
            workflow_id=wf,
            run_id="r1",
            graph_name="g",
            status=RunStatus.RUNNING,
            context={"locale": "fr"},
            created_at=T0,
            updated_at=T0,
            trace_id=TRACE["traceId"],
            traceparent=f"00-{TRACE['traceId']}-{TRACE['spanId']}-01",
        )
    )
    doc = await archive.runs.find_one({"_id": wf})
    assert doc is not None
    assert (doc["workflowId"], doc["status"], doc["context"]) == (wf, "running", {"locale": "fr"})
    assert (doc["currentNodeId"], doc["pendingInput"], doc["portData"]) == (None, None, {})
    assert doc["trace"] == {"collection": "run_trace"} and doc["traceId"] == TRACE["traceId"]
    assert await run_traceparent(archive, wf) == doc["traceparent"]
    assert await run_traceparent(archive, unique("missing")) is None

    pending = {"node_id": "ask", "prompt": "Name?", "ui_schema": {"type": "object"}}
    await archive.update_run(wf, status=RunStatus.PAUSED, pending_input=pending)
    doc = await archive.runs.find_one({"_id": wf})
    assert doc is not None and doc["currentNodeId"] == "ask"
    assert doc["pendingInput"] == {
        "nodeId": "ask",
        "uiSchema": {"type": "object"},
        "prompt": "Name?",
        "requestedAt": None,
    }
    # As the gateway terminates a run: it is at no node and waits for nobody.
    await archive.update_run(wf, status=RunStatus.TERMINATED, current_nodes=[])
    record = await archive.get_run(wf)
    assert record is not None
    assert (record.current_node_id, record.pending_input, record.trace_id) == (
        None,
        None,
        TRACE["traceId"],
    )
    doc = await archive.runs.find_one({"_id": wf})
    assert doc is not None and doc["pendingInput"] is None


async def test_a_gateway_without_tracing_never_unsets_the_workers_trace_id(
    archive: RunArchive,
) -> None:
    wf = unique("wf")
    await archive.update_run(wf, create_with=IDENTITY, trace_id=TRACE["traceId"])
    record = RunRecord(
        workflow_id=wf, run_id="r1", graph_name="g", status="running", created_at=T0, updated_at=T0
    )
    await archive.create_run(record)
    got = await archive.get_run(wf)
    assert got is not None and got.trace_id == TRACE["traceId"]
    doc = await archive.runs.find_one({"_id": wf})
    assert doc is not None and doc["workflowId"] == wf


async def test_archived_messages_carry_the_trace_that_posted_them(archive: RunArchive) -> None:
    stream = unique("stream")
    traced = [StoredMessage(seq, 1_700_000_000_000 + seq, b'{"t":3}') for seq in (1, 2)]
    await replayed(archive, SaveMessages.of(stream, traced, trace_ids=TRACE))
    await archive.save_messages(stream, [StoredMessage(3, 1_700_000_000_003, b'{"t":4}')])
    docs = await archive.archived_messages(stream)
    assert [(d.get("traceId"), d.get("spanId")) for d in docs] == [
        (TRACE["traceId"], TRACE["spanId"]),
        (TRACE["traceId"], TRACE["spanId"]),
        (None, None),  # tracing off: no field at all
    ]
    assert [m.raw for m in await archive.messages(stream)] == [b'{"t":3}', b'{"t":3}', b'{"t":4}']


async def test_node_start_and_end_move_the_run_and_keep_its_messages_in_its_report(
    archive: RunArchive,
) -> None:
    wf = unique("wf")
    # The worker may record a node before the gateway wrote the run: it creates it.
    await replayed(
        archive,
        NodeStarted(workflow_id=wf, run_id="r1", node_id="fetch", create_with=IDENTITY),
    )
    await replayed(
        archive,
        NodeStarted(workflow_id=wf, run_id="r1", node_id="side", create_with=IDENTITY),
    )
    doc = await archive.runs.find_one({"_id": wf})
    assert doc is not None
    assert (doc["workflowId"], doc["tenant_id"], doc["currentNodeId"]) == (wf, "acme", "side")
    assert (await archive.get_run(wf) or pytest.fail("not readable")).status == "running"
    assert sorted(doc["current_nodes"]) == ["fetch", "side"]

    entries = [
        TraceEntry(
            message=envelope("m-in", "_previous", "2025-03-01T12:00:00+00:00", {"url": "x"}),
            node_id="fetch",
            role="input",
            trace_ids=TRACE,
        ),
        TraceEntry(
            message=envelope("m-out", "fetch", "2025-03-01T12:00:01.5+00:00", [1, 2]),
            node_id="fetch",
            role="output",
            trace_ids=TRACE,
        ),
    ]
    finished = NodeFinished(
        workflow_id=wf,
        run_id="r1",
        report=NodeReport(node_id="fetch", node_type="tool", status=NodeStatus.SUCCESS),
        input=entries[0].message,
        output=entries[1].message,
        trace=entries,
        port_data={port_key("items.v1"): [1, 2]},
        trace_id=TRACE["traceId"],
    )
    await replayed(archive, finished)
    await replayed(archive, finished)  # replayed twice by the outbox: no duplicate

    doc = await archive.runs.find_one({"_id": wf})
    assert doc is not None
    assert doc["current_nodes"] == ["side"] and doc["currentNodeId"] == "side"
    assert doc["trace"] == {"collection": "run_trace", "lastMessageId": "m-out"}
    assert doc["traceId"] == TRACE["traceId"]
    assert await port_data(archive, wf) == {"fetch": {"items_v1": [1, 2]}}
    assert await port_data(archive, unique("missing")) is None

    trace = await run_trace(archive, wf)
    assert [(m["messageId"], m["role"], m["nodeId"]) for m in trace] == [
        ("m-in", "input", "fetch"),
        ("m-out", "output", "fetch"),
    ]
    assert trace[1]["payload"] == [1, 2] and trace[1]["from"] == "fetch"
    assert {(m["traceId"], m["spanId"], m["workflowId"]) for m in trace} == {
        (TRACE["traceId"], TRACE["spanId"], wf)
    }
    # One document for the node: its report keeps both envelopes and their trace fields.
    assert await archive.run_trace_coll.count_documents({"workflowId": wf}) == 0
    [report] = await archive.node_reports(wf)
    assert report["output"]["messageId"] == "m-out"
    assert [(t["messageId"], t["role"]) for t in report["trace"]] == [
        ("m-in", "input"),
        ("m-out", "output"),
    ]
    assert report["stream_id"] == wf


def test_a_queued_node_end_carries_each_envelope_once_and_reads_back_whole() -> None:
    # The outbox's JSON: the input and output travel once, their trace entries name
    # them; a prompt-like entry that is neither stays whole.
    payload = {"text": "x" * 2000}
    entries = [
        TraceEntry(
            message=envelope("m-in", "_previous", "2025-03-01T12:00:00+00:00", payload),
            node_id="fetch",
            role="input",
            trace_ids=TRACE,
        ),
        TraceEntry(
            message=envelope("m-out", "fetch", "2025-03-01T12:00:01+00:00", payload),
            node_id="fetch",
            role="output",
            attempt=2,
        ),
        TraceEntry(
            message=envelope("m-other", "fetch", "2025-03-01T12:00:02+00:00", {"n": 1}),
            node_id="fetch",
            role="output",
        ),
    ]
    finished = NodeFinished(
        workflow_id="wf",
        run_id="r1",
        report=NodeReport(node_id="fetch", node_type="tool", status=NodeStatus.SUCCESS),
        input=entries[0].message,
        output=entries[1].message,
        trace=entries,
    )
    wire = QueuedOp(op=finished, queued_at_ms=0).model_dump_json()
    assert wire.count("x" * 2000) == 2  # ``input`` and ``output``, not again in the trace
    read = QueuedOp.model_validate_json(wire).op
    assert read == finished
    assert read.writes() == finished.writes()

    # Queued in full by a worker before this form: read as it was written.
    whole = finished.model_dump(mode="python")
    whole["trace"] = [entry.model_dump(mode="json") for entry in entries]
    older = QueuedOp.model_validate({"op": whole, "queued_at_ms": 0}).op
    assert older == finished


def node_entries(prefix: str, node: str, times: tuple[str, str]) -> list[TraceEntry]:
    """A node's input and output NodeMessages (``<prefix>-in``, ``<prefix>-out``)."""
    return [
        TraceEntry(
            message=envelope(f"{prefix}-{suffix}", sender, at, None if role == "input" else node),
            node_id=node,
            role=role,
        )
        for (role, suffix, sender), at in zip(
            (("input", "in", "_previous"), ("output", "out", node)), times, strict=True
        )
    ]


async def test_the_trace_merges_prompts_and_runs_archived_before_reports_kept_it(
    archive: RunArchive,
) -> None:
    wf = unique("wf")
    # An older archive: the node's envelopes as documents of their own, and its report.
    old = node_entries("o", "old", ("2025-03-01T12:00:00+00:00", "2025-03-01T12:00:01+00:00"))
    await save_trace(archive, wf, "r1", old)
    # A prompt (its own document) between the old node and a new one (in its report).
    prompt = TraceEntry(
        message=envelope("p", "ask", "2025-03-01T12:00:02+00:00", None),
        node_id="ask",
        role="prompt",
    )
    await replayed(
        archive,
        NodeStarted(
            workflow_id=wf, run_id="r1", node_id="ask", create_with=IDENTITY, trace=[prompt]
        ),
    )
    new = node_entries("n", "new", ("2025-03-01T12:00:03+00:00",) * 2)
    await replayed(
        archive,
        NodeFinished(
            workflow_id=wf,
            run_id="r1",
            report=NodeReport(node_id="new", node_type="tool", status=NodeStatus.SUCCESS),
            input=new[0].message,
            output=new[1].message,
            trace=new,
        ),
    )
    assert new[1].message["payload"] == "new"
    trace = await run_trace(archive, wf)
    # In time order; the same instant orders input before output.
    assert [m["messageId"] for m in trace] == ["o-in", "o-out", "p", "n-in", "n-out"]
    assert trace[-1]["payload"] == "new" and trace[-1]["role"] == "output"


def test_port_data_is_bounded_and_keyed_safely() -> None:
    small = {"words": 3}
    assert bounded_output(small, 100) == small
    big = bounded_output({"text": "x" * 1000}, 100)
    assert big["truncated"] is True and big["bytes"] > 1000
    assert len(big["summary"]) <= 200
    assert (port_key(None), port_key("a.b"), port_key("$where")) == ("output", "a_b", "_where")
