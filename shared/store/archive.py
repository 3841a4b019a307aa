"""The MongoDB archive: what must outlive Redis.

CONTRACT (keep these names and semantics).
Uses ``pymongo.AsyncMongoClient`` and a conservative subset of operations that
the nx-27017 wire server supports: pages of messages per stream and of node
reports per run, which the archiver keeps open across its batches until full
(``spindle.shared.store.open_pages``), no unbounded arrays or objects, inserts
and idempotent upserts keyed by ``_id``. The write requests and the page documents
they become are built in ``spindle.shared.store.archive_writes``.

Collections::

    runs          _id=workflow_id; run_id, tenant_id, user_id, graph_name, status,
                  current_nodes, pending_input, context, input, output, error,
                  created_at, updated_at (datetimes, UTC), and seed 000's
                  workflowId, currentNodeId, portData, trace, pendingInput, plus
                  traceId, traceparent (``spindle.shared.store.run_document``)
                  indexes: (tenant_id, created_at), (tenant_id, status), graph_name
    message_pages stream_id, first_seq, last_seq, and the entries {seq, ts, raw
                  (str, the stored compact JSON), traceId, spanId (of the posting
                  span; absent when tracing is off)} of at most PAGE_MAX_MESSAGES
                  messages, in one of two forms (``page_messages`` reads both):
                  - open: _id="<stream_id>:<first seq:012d>:<µs>",
                    by_seq: {"<seq>": entry}; the archiver adds each later
                    batch's messages of the stream (``$set`` per entry, ``$min``
                    first_seq, ``$max`` last_seq) until the page holds about
                    OPEN_PAGE_MAX_BYTES;
                  - inserted once, about PAGE_MAX_BYTES at most:
                    _id="<stream_id>:<first seq:012d>-<last seq:012d>",
                    messages: [entry] in seq order (a batch written without the
                    archiver, and archives of earlier versions)
                  a seq may sit in two pages (a batch another drainer wrote
                  again): read once — index (stream_id, last_seq)
    messages      _id="<stream_id>:<seq:012d>"; stream_id, seq, ts, raw, traceId,
                  spanId: one document per message, as archives before pages
                  kept them; read with the pages, no longer written — index
                  (stream_id, seq) unique
    run_trace     _id=messageId; one NodeMessage of a run that no node report
                  keeps (a prompt's), with workflowId, nodeId, role, at, streamId
                  (``spindle.shared.store.run_trace``) — indexes (workflowId, at),
                  streamId
    node_report_pages
                  workflow_id, stream_id, and reports {key
                  ("<workflow_id>:<node_id>:<visit>"), report fields, workflow_id,
                  stream_id, input (envelope), output (envelope), trace (the two
                  envelopes' trace fields: role, at, attempt, traceId, …)}, at
                  most PAGE_MAX_MESSAGES a page, in one of two forms
                  (``page_report_saves`` reads both):
                  - open: _id="<workflow_id>:<µs>:<n>", by_key:
                    {"<report_field(key, attempt)>": report + saved (µs, the
                    fold's order)}; the archiver adds each later batch's reports
                    of the run (an attempt saved again replacing its entry)
                    until the page holds about OPEN_PAGE_MAX_BYTES;
                  - inserted once, about PAGE_MAX_BYTES at most:
                    _id="<workflow_id>:<digest of its reports>", recorded_at
                    (date), saved (µs), reports: [report]
                  a key saved again in a later page replaces the earlier
                  (``node_reports()`` folds them) — indexes workflow_id, stream_id
    node_reports  _id="<workflow_id>:<node_id>:<visit>"; the same fields as a
                  page's report (recorded_at its first save): one document per
                  node execution, as archives before report pages kept them;
                  read with the pages, no longer written — indexes
                  (workflow_id, started_at), stream_id
    graphs        _id="<tenant_id>/<name>"; name, spec (dict), tenant_id, updated_at
    catalogs      _id=worker identity (default: a hash of the catalog); catalog, updated_at
                  — ``get_catalog`` merges them all, so workers offering
                  different node types and tools add up

Differences seen with nx-27017 (0.8.1, on neosqlite 1.17) versus MongoDB, and
how this module stays inside the common subset:

- Datetimes come back naive unless the client is ``tz_aware``; we ask for
  ``tz_aware=True`` and still normalise every datetime read to aware UTC.
- ``$set`` of a top-level datetime on an EXISTING document stores the string
  ``"YYYY-MM-DD HH:MM:SS.ffffff"`` (UTC) instead of a date (nested datetimes,
  inserts, replacements, upsert-inserts and ``$currentDate`` keep real dates),
  so range queries and sorts on such a field break. ``update_run`` sets
  ``updated_at`` with ``$currentDate``; ``RunRecord`` parses either form back
  to an aware UTC datetime; nothing sorts or filters on a ``$set`` date.
- ``$max`` with a datetime does not update the field: not used.
- ``replace_one(..., upsert=True)`` whose replacement lacks ``_id`` inserts a
  document with a NEW ObjectId instead of the filter's ``_id``: replacements
  here always carry their ``_id``.
- Pipeline-style updates (``update_one(f, [{"$set": ...}])``) fail with
  ``'list' object has no attribute 'keys'``: only operator updates here.
- Unknown update operators are accepted silently instead of refused.
- Index names are not kept (``list_indexes`` shows ``idx_<coll>_<fields>``) and
  descending keys are listed (and presumably built) ascending; harmless for
  equality-prefix indexes like ours, and ``create_index`` stays idempotent.
- A unique index does not refuse two documents that both lack the field, and
  conflicting index options on an existing name are accepted (seen by the
  team's probe): our unique index is on fields every document has.
- ``Decimal128`` cannot be stored (JSON serialisation error in the server), and
  documents as ``_id`` fail in queries: ids here are strings, values plain JSON.
- ``$not`` (and other rarer query operators) are not implemented; queries here
  use equality and ``$gt`` only.
- ``GridFSBucket`` fails (``no such column: id``); nothing here uses GridFS.
- ``$push`` of subdocuments onto an array of an EXISTING document stores every
  element of the array as a JSON string (an upsert that creates the array keeps
  them documents): open pages add entries with ``$set`` of one field each.
- An upsert that INSERTS with a dotted ``$min`` (``{"$min": {"a.b": 1}}``) stores a
  top-level field named ``"a.b"``; ``$set`` with dotted paths nests as MongoDB
  does. Only top-level ``$min``/``$max`` here.
- ``insert_many(ordered=False)`` with duplicate ids behaves like MongoDB
  (inserts the rest, ``BulkWriteError`` code 11000), which makes archiving
  messages idempotent with one round trip.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
from pymongo import ASCENDING, DESCENDING, AsyncMongoClient
from pymongo.errors import BulkWriteError, PyMongoError

from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import NodeReport
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.platform.mongo import mongo_client
from spindle.shared.store.archive_writes import (
    DUPLICATE_KEY,
    MESSAGE_PAGES,
    NODE_REPORT_PAGES,
    UNORDERED,
    ArchiveRequest,
    ArchiveWrite,
    MessagesToPage,
    MongoRequest,
    ReportToPage,
    message_entries,
    message_id,
    message_page_writes,
    message_pages,
    node_report_fields,
    node_report_id,
    node_report_pages,
    node_report_write,
    page_messages,
    page_report_saves,
    page_slots,
    report_page_writes,
    run_update,
    run_update_document,
)
from spindle.shared.store.call_records import ensure_call_record_indexes
from spindle.shared.store.open_pages import PAGE_MAX_BYTES, PAGE_MAX_MESSAGES, OpenPages, PageState
from spindle.shared.store.prompts import PromptStore
from spindle.shared.store.run_document import (
    PROGRESS_KEYS,
    TRACE_COLLECTION,
    RunRecord,
    as_utc,
    normalise,
    utcnow,
)
from spindle.shared.store.run_queries import RunFilter, run_filter_query

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

    from spindle.shared.platform.settings import Settings

# Run records leave out the document's port data (``spindle.shared.store.run_document``).
NOT_PORT_DATA = {"portData": 0}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class RunArchive:
    """Runs, messages, node reports, graphs and worker catalogs in MongoDB.

    The archive owns its client: ``close()`` closes it.
    """

    def __init__(self, client: AsyncMongoClient[dict[str, Any]], db_name: str) -> None:
        self._client = client
        self._db: AsyncDatabase[dict[str, Any]] = client[db_name]
        self.runs: AsyncCollection[dict[str, Any]] = self._db["runs"]
        # Archives from before pages: one document per message, read, not written.
        self.messages_coll: AsyncCollection[dict[str, Any]] = self._db["messages"]
        self.message_pages: AsyncCollection[dict[str, Any]] = self._db[MESSAGE_PAGES]
        # Archives from before report pages: one document per node execution, read.
        self.node_reports_coll: AsyncCollection[dict[str, Any]] = self._db["node_reports"]
        self.node_report_pages: AsyncCollection[dict[str, Any]] = self._db[NODE_REPORT_PAGES]
        self.graphs: AsyncCollection[dict[str, Any]] = self._db["graphs"]
        self.catalogs: AsyncCollection[dict[str, Any]] = self._db["catalogs"]
        # NodeMessages no node report keeps: prompts (spindle.shared.store.run_trace).
        self.run_trace_coll: AsyncCollection[dict[str, Any]] = self._db[TRACE_COLLECTION]

    @classmethod
    def from_settings(cls, settings: Settings) -> RunArchive:
        return cls(mongo_client(settings, appname="spindle"), settings.mongo_db)

    @property
    def database(self) -> AsyncDatabase[dict[str, Any]]:
        return self._db

    async def ensure_indexes(self) -> None:
        """Create the indexes (idempotent; fixed names)."""
        await self.runs.create_index(
            [("tenant_id", ASCENDING), ("created_at", DESCENDING)], name="tenant_created"
        )
        await self.runs.create_index(
            [("tenant_id", ASCENDING), ("status", ASCENDING)], name="tenant_status"
        )
        await self.runs.create_index([("graph_name", ASCENDING)], name="graph_name")
        # GET /runs?forked_from= and an evaluation's forks (docs/replay-and-compare.md).
        await self.runs.create_index([("forked_from.workflow_id", ASCENDING)], name="forked_from")
        await self.messages_coll.create_index(
            [("stream_id", ASCENDING), ("seq", ASCENDING)], name="stream_seq", unique=True
        )
        await self.message_pages.create_index(
            [("stream_id", ASCENDING), ("last_seq", ASCENDING)], name="stream_last_seq"
        )
        await self.node_reports_coll.create_index(
            [("workflow_id", ASCENDING), ("started_at", ASCENDING)], name="workflow_started"
        )
        await self.node_reports_coll.create_index([("stream_id", ASCENDING)], name="stream")
        await self.node_report_pages.create_index([("workflow_id", ASCENDING)], name="workflow")
        await self.node_report_pages.create_index([("stream_id", ASCENDING)], name="stream")
        await self.run_trace_coll.create_index(
            [("workflowId", ASCENDING), ("at", ASCENDING)], name="workflow_at"
        )
        await self.run_trace_coll.create_index([("streamId", ASCENDING)], name="stream")
        await PromptStore(self._db).ensure_indexes()
        await ensure_call_record_indexes(self)

    async def close(self) -> None:
        await self._client.close()

    async def ping(self) -> bool:
        """True when the server answers."""
        try:
            await self._client.admin.command("ping")
        except PyMongoError:
            return False
        return True

    async def bulk_apply(
        self, writes: Sequence[ArchiveWrite], *, pages: OpenPages | None = None
    ) -> None:
        """Apply write requests: one bulk command per collection, in their order.

        Inserts of documents that exist already are skipped (idempotent replays).
        The run documents are written last: a run the archive shows as finished
        has its messages, node reports and trace archived already.

        Args:
            writes: the requests, each with its collection.
            pages: the batch's plan onto the open pages: its messages and node
                reports are added to them (``spindle.shared.store.open_pages``);
                without, they are inserted as pages of this batch alone.

        Raises:
            PyMongoError: a write MongoDB did not take (the others may have been).
        """
        by_collection: dict[str, list[MongoRequest]] = {}
        to_page: dict[str, list[dict[str, Any]]] = {}
        to_report_page: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for collection, request in writes:
            if isinstance(request, MessagesToPage):
                to_page.setdefault(request.stream_id, []).extend(request.entries)
            elif isinstance(request, ReportToPage):
                run = (request.workflow_id, request.stream_id)
                to_report_page.setdefault(run, []).append(request.report)
            else:
                by_collection.setdefault(collection, []).append(request)
        # A batch's messages of a stream, and its node reports of a run, go on one
        # page each, the archiver's open one while it has room: documents per
        # node stay below one (docs/operations/observability.md#run-archive).
        if to_page:
            by_collection[MESSAGE_PAGES] = message_page_writes(to_page, pages)
        if to_report_page:
            by_collection[NODE_REPORT_PAGES] = report_page_writes(to_report_page, pages)
        runs = by_collection.pop("runs", None)
        await asyncio.gather(
            *(self._bulk(name, requests) for name, requests in by_collection.items())
        )
        if runs:
            await self._bulk("runs", runs)

    async def _bulk(self, name: str, requests: list[MongoRequest]) -> None:
        try:
            await self._db[name].bulk_write(requests, ordered=name not in UNORDERED)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(error.get("code") != DUPLICATE_KEY for error in errors):
                raise

    # -- runs ----------------------------------------------------------------

    async def create_run(self, record: RunRecord) -> None:
        """Store a run; idempotent, and never undoes progress already recorded.

        The worker may report progress (e.g. ``paused``) before the gateway has
        written the run: identity fields are set, progress fields only on insert.
        """
        doc = record.to_document()
        progress = {k: doc.pop(k) for k in PROGRESS_KEYS if k in doc}
        progress["created_at"] = doc.pop("created_at")
        for key in ("traceId", "traceparent", "conversation_id"):
            if doc.get(key) is None:
                doc.pop(key, None)  # never unset what a traced worker recorded
        doc_id = doc.pop("_id")
        await self.runs.update_one(
            {"_id": doc_id}, {"$set": doc, "$setOnInsert": progress}, upsert=True
        )

    async def update_run(
        self, workflow_id: str, *, create_with: dict[str, Any] | None = None, **fields: Any
    ) -> bool:
        """Set fields of a run; ``updated_at`` becomes the server's time unless given.

        Args:
            workflow_id: the run.
            create_with: identity fields (``run_id``, ``graph_name``, ...) to create
                the run with if it is not archived yet, so no update is lost to a
                race with ``create_run``.
            **fields: ``RunRecord`` fields to set.

        Returns:
            False when no such run exists (and ``create_with`` was not given).

        Raises:
            ValueError: a field that ``RunRecord`` does not have.
        """
        update = run_update_document(workflow_id, create_with=create_with, **fields)
        result = await self.runs.update_one(
            {"_id": workflow_id}, update, upsert=create_with is not None
        )
        return result.matched_count > 0 or result.upserted_id is not None

    async def get_run(self, workflow_id: str) -> RunRecord | None:
        doc = await self.runs.find_one({"_id": workflow_id}, NOT_PORT_DATA)
        return RunRecord.from_document(doc) if doc is not None else None

    async def list_runs(
        self,
        *,
        tenant_id: str | None = None,
        status: str | None = None,
        graph_name: str | None = None,
        limit: int = 50,
        offset: int = 0,
        where: RunFilter | None = None,
    ) -> tuple[list[RunRecord], int]:
        """Runs matching every given filter (``where``'s too), newest first, and how many
        match in all."""
        given = {"tenant_id": tenant_id, "status": status, "graph_name": graph_name}
        where = (where or RunFilter()).model_copy(
            update={k: v for k, v in given.items() if v is not None}
        )
        query = run_filter_query(where)
        total = await self.runs.count_documents(query)
        cursor = (
            self.runs.find(query, NOT_PORT_DATA)
            .sort([("created_at", DESCENDING), ("_id", DESCENDING)])
            .skip(max(0, offset))
            .limit(max(0, limit))
        )
        records = [RunRecord.from_document(doc) async for doc in cursor] if limit > 0 else []
        return records, total

    # -- messages ------------------------------------------------------------

    async def save_messages(
        self,
        stream_id: str,
        messages: Sequence[StoredMessage],
        *,
        trace_ids: dict[str, str] | None = None,
    ) -> int:
        """Archive stored messages; saving one again is a no-op (idempotent).

        Args:
            trace_ids: ``traceId`` / ``spanId`` of the span that posted them
                (``spindle.shared.platform.telemetry.current_trace_ids``), stored on each; none
                when tracing is off.

        Returns:
            How many were new.
        """
        if not messages:
            return 0
        first = min(m.seq for m in messages)
        archived = {m["seq"] for m in await self.archived_messages(stream_id, after_seq=first - 1)}
        entries = [
            e for e in message_entries(messages, trace_ids=trace_ids) if e["seq"] not in archived
        ]
        pages = message_pages(stream_id, entries)
        if not pages:
            return 0
        try:
            await self.message_pages.insert_many(pages, ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(error.get("code") != DUPLICATE_KEY for error in errors):
                raise
        return len({e["seq"] for e in entries})

    async def archived_messages(
        self, stream_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """``{seq, ts, raw, traceId?, spanId?}`` of a stream's archived messages with
        ``seq > after_seq``, in seq order, each seq once (the first page that has it),
        at most ``limit`` of them.

        Pages and the one-document-per-message archive of earlier versions alike.
        """
        if limit is not None and limit <= 0:
            return []
        found: dict[int, dict[str, Any]] = {}
        pages = self.message_pages.find(
            {"stream_id": stream_id, "last_seq": {"$gt": after_seq}}
        ).sort([("first_seq", ASCENDING), ("_id", ASCENDING)])
        async for page in pages:
            # Pages come by first seq: one starting past the limit-th adds nothing.
            full = limit is not None and len(found) >= limit
            if full and int(page["first_seq"]) > sorted(found)[(limit or 0) - 1]:
                break
            for entry in page_messages(page):
                seq = int(entry["seq"])
                if seq > after_seq:
                    found.setdefault(seq, entry)
        legacy = self.messages_coll.find({"stream_id": stream_id, "seq": {"$gt": after_seq}})
        if limit is not None:
            legacy = legacy.sort("seq", ASCENDING).limit(limit)
        async for doc in legacy:
            doc.pop("_id", None)
            doc.pop("stream_id", None)
            found.setdefault(int(doc["seq"]), doc)
        return [found[seq] for seq in sorted(found)[:limit]]

    async def messages(
        self, stream_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Archived messages of a stream with ``seq > after_seq``, in seq order."""
        entries = await self.archived_messages(stream_id, after_seq=after_seq, limit=limit)
        return [StoredMessage(int(e["seq"]), int(e["ts"]), e["raw"].encode()) for e in entries]

    # -- node reports --------------------------------------------------------

    async def save_node_report(
        self, workflow_id: str, report: NodeReport, *, input: Any = None, output: Any = None
    ) -> None:
        """Archive one node execution; saving it again replaces it (idempotent)."""
        write = node_report_write(workflow_id, report, input=input, output=output)
        await self.bulk_apply([(NODE_REPORT_PAGES, write)])

    async def node_reports(self, workflow_id: str) -> list[dict[str, Any]]:
        """A run's node reports in execution order (start time, then first save).

        Each node execution once, as its last save left it: the pages are folded
        in the order they were recorded (a later attempt's report replaces the
        earlier), after the per-report documents of older archives.
        """
        found: dict[str, dict[str, Any]] = {}
        async for doc in self.node_reports_coll.find({"workflow_id": workflow_id}):
            found[str(doc.pop("_id"))] = normalise(doc)
        saves: list[tuple[int, int, datetime, dict[str, Any]]] = []
        async for page in self.node_report_pages.find({"workflow_id": workflow_id}):
            for saved, recorded_at, report in page_report_saves(page):
                saves.append((saved, int(report.get("attempt") or 1), recorded_at, report))
        for _, _, recorded_at, report in sorted(saves, key=lambda save: save[:2]):
            key = str(report.pop("key"))
            first = found.get(key, {}).get("recorded_at", recorded_at)
            found[key] = normalise({**report, "recorded_at": first})
        return sorted(found.values(), key=_execution_order)

    # -- graphs --------------------------------------------------------------

    async def save_graph(self, spec: GraphSpec, *, tenant_id: str) -> None:
        """Store a tenant's graph definition under its name (replacing an older one)."""
        doc_id = _graph_id(tenant_id, spec.name)
        await self.graphs.replace_one(
            {"_id": doc_id},
            {
                "_id": doc_id,
                "name": spec.name,
                "spec": spec.model_dump(mode="json", by_alias=True, exclude_none=True),
                "tenant_id": tenant_id,
                "updated_at": utcnow(),
            },
            upsert=True,
        )

    async def get_graph(self, name: str, *, tenant_id: str) -> GraphSpec | None:
        """The tenant's graph of that name (other tenants' graphs are invisible)."""
        doc = await self.graphs.find_one({"_id": _graph_id(tenant_id, name)})
        return GraphSpec.model_validate(doc["spec"]) if doc is not None else None

    async def list_graphs(self, *, tenant_id: str | None = None) -> list[GraphSpec]:
        """Stored graphs by name (optionally only one tenant's)."""
        query: dict[str, Any] = {} if tenant_id is None else {"tenant_id": tenant_id}
        cursor = self.graphs.find(query).sort("_id", ASCENDING)
        return [GraphSpec.model_validate(doc["spec"]) async for doc in cursor]

    # -- worker catalogs -----------------------------------------------------

    async def save_catalog(self, catalog: Catalog, *, worker_id: str | None = None) -> str:
        """Publish a worker's catalog. Workers with different node types and tools
        each keep a document, and ``get_catalog`` merges them.

        Args:
            worker_id: the publishing worker's identity; by default the catalog's
                content hash, so identical workers share one document.

        Returns:
            The document id used.
        """
        body = catalog.model_dump(mode="json")
        doc_id = (
            worker_id
            or hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
        )
        await self.catalogs.replace_one(
            {"_id": doc_id},
            {"_id": doc_id, "catalog": body, "updated_at": utcnow()},
            upsert=True,
        )
        return doc_id

    async def get_catalog(self) -> Catalog | None:
        """Every published catalog merged (newer documents win on equal names),
        or None when no worker has published."""
        merged: Catalog | None = None
        async for doc in self.catalogs.find({}).sort(
            [("updated_at", ASCENDING), ("_id", ASCENDING)]
        ):
            catalog = Catalog.model_validate(doc["catalog"])
            merged = catalog if merged is None else merged.merged(catalog)
        return merged

    async def delete_catalogs(self) -> None:
        """Forget every published catalog (tests; workers republish at start)."""
        await self.catalogs.delete_many({})


def _execution_order(report: dict[str, Any]) -> tuple[bool, str, datetime, str]:
    """Start time (reports without one first, as MongoDB sorts nulls), first save."""
    started = report.get("started_at")
    recorded = report.get("recorded_at")
    return (
        started is not None,
        str(started or ""),
        recorded if isinstance(recorded, datetime) else _EPOCH,
        f"{report.get('node_id')}:{report.get('visit')}",
    )


def _graph_id(tenant_id: str, name: str) -> str:
    # Graph names are unique per tenant, not globally.
    return f"{tenant_id}/{name}"


__all__ = [
    "DUPLICATE_KEY",
    "MESSAGE_PAGES",
    "NODE_REPORT_PAGES",
    "PAGE_MAX_BYTES",
    "PAGE_MAX_MESSAGES",
    "UNORDERED",
    "ArchiveRequest",
    "ArchiveWrite",
    "MessagesToPage",
    "MongoRequest",
    "OpenPages",
    "PageState",
    "ReportToPage",
    "RunArchive",
    "RunRecord",
    "StoredMessage",
    "as_utc",
    "message_entries",
    "message_id",
    "message_pages",
    "node_report_fields",
    "node_report_id",
    "node_report_pages",
    "node_report_write",
    "page_messages",
    "page_report_saves",
    "page_slots",
    "run_update",
    "run_update_document",
    "utcnow",
]
