"""The archive writes the outbox queues: what each one writes and how it is named.

Every operation is idempotent (see ``spindle.worker.archive.outbox``), so a
replay of one MongoDB already took is harmless.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field
from pymongo.errors import ConnectionFailure, ExecutionTimeout, PyMongoError, WTimeoutError

from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.runs import NodeReport
from spindle.shared.store.archive import (
    MESSAGE_PAGES,
    NODE_REPORT_PAGES,
    MessagesToPage,
    message_entries,
    node_report_write,
    run_update,
)
from spindle.shared.store.call_records import SaveCallRecords
from spindle.shared.store.run_trace import NodeFinished, NodeStarted

if TYPE_CHECKING:
    from spindle.shared.store.archive import ArchiveWrite, RunArchive


class ArchivedMessage(BaseModel):
    """One stored message of a stream, as the archive keeps it."""

    seq: int
    ts: int
    raw: str


class SaveMessages(BaseModel):
    """``RunArchive.save_messages`` of part of a stream."""

    kind: Literal["messages"] = "messages"
    stream_id: str
    messages: list[ArchivedMessage]
    trace_ids: dict[str, str] = Field(
        default_factory=dict, description="traceId / spanId of the span that posted them"
    )

    @classmethod
    def of(
        cls,
        stream_id: str,
        messages: list[StoredMessage],
        *,
        trace_ids: dict[str, str] | None = None,
    ) -> SaveMessages:
        return cls(
            stream_id=stream_id,
            messages=[ArchivedMessage(seq=m.seq, ts=m.ts, raw=m.raw.decode()) for m in messages],
            trace_ids=trace_ids or {},
        )

    async def apply(self, archive: RunArchive) -> None:
        await archive.save_messages(self.stream_id, self._stored(), trace_ids=self.trace_ids)

    def writes(self) -> list[ArchiveWrite]:
        """Write requests of this operation (see ``RunArchive.bulk_apply``)."""
        entries = message_entries(self._stored(), trace_ids=self.trace_ids)
        return [(MESSAGE_PAGES, MessagesToPage(self.stream_id, entries))]

    def _stored(self) -> list[StoredMessage]:
        return [StoredMessage(m.seq, m.ts, m.raw.encode()) for m in self.messages]

    def describe(self) -> str:
        seqs = [m.seq for m in self.messages]
        span = f"{min(seqs)}-{max(seqs)}" if seqs else "none"
        return f"messages {span} of {self.stream_id}"


class UpdateRun(BaseModel):
    """``RunArchive.update_run``: ``$set`` of some fields of a run."""

    kind: Literal["update_run"] = "update_run"
    workflow_id: str
    create_with: dict[str, Any] | None = None
    fields: dict[str, Any] = Field(default_factory=dict)

    async def apply(self, archive: RunArchive) -> None:
        await archive.update_run(self.workflow_id, create_with=self.create_with, **self.fields)

    def writes(self) -> list[ArchiveWrite]:
        """Write requests of this operation (see ``RunArchive.bulk_apply``)."""
        return [("runs", run_update(self.workflow_id, create_with=self.create_with, **self.fields))]

    def describe(self) -> str:
        return f"update of run {self.workflow_id} ({', '.join(sorted(self.fields))})"


class SaveNodeReport(BaseModel):
    """``RunArchive.save_node_report`` of one node execution."""

    kind: Literal["node_report"] = "node_report"
    workflow_id: str
    report: NodeReport
    input: Any = None
    output: Any = None

    async def apply(self, archive: RunArchive) -> None:
        await archive.save_node_report(
            self.workflow_id, self.report, input=self.input, output=self.output
        )

    def writes(self) -> list[ArchiveWrite]:
        """Write requests of this operation (see ``RunArchive.bulk_apply``)."""
        request = node_report_write(
            self.workflow_id, self.report, input=self.input, output=self.output
        )
        return [(NODE_REPORT_PAGES, request)]

    def describe(self) -> str:
        return f"report of node {self.report.node_id} in {self.workflow_id}"


ArchiveOperation = (
    SaveMessages | UpdateRun | SaveNodeReport | NodeStarted | NodeFinished | SaveCallRecords
)
ArchiveOp = Annotated[ArchiveOperation, Field(discriminator="kind")]


class QueuedOp(BaseModel):
    """An operation in the outbox, with when it was queued (epoch ms)."""

    op: ArchiveOp
    queued_at_ms: int
    # Makes every entry unique, so a batch is popped only if it is still the one read.
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)


def is_transient(exc: BaseException) -> bool:
    """True for failures that a later retry can fix (MongoDB down, slow or failing over)."""
    if isinstance(exc, ConnectionFailure | ExecutionTimeout | WTimeoutError | TimeoutError):
        return True
    if isinstance(exc, PyMongoError):
        return bool(exc.timeout) or exc.has_error_label("RetryableWriteError")
    return isinstance(exc, OSError)
